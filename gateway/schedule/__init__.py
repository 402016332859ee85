"""What a person scheduled: reminders (``REMINDERS.md``), scheduled prompts (``CRONS.json``) and task
due dates (``TASKS.json``), in the person's own time zone (docs/proactive.md).

``zones`` validates IANA names and turns local wall-clock slots into instants (DST rules), ``rules``
parses phrases into RRULE or cron recurrences and walks them, ``items`` reads the three files (every
invalid line becomes a ``Problem``, never dropped), ``engine`` arms one delayed bus job per item and
fires it, ``watch`` picks up hand edits. The files stay the truth: a job carries ids only and
re-reads the file when it fires, so a cancelled or edited item is never delivered stale.
"""
