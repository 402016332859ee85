"""Memory hygiene (seed 001's housekeeping passes): a weekly job proposes, the person decides.

* ``duplicates``: people files about the same person that do not link each other, and the
  link-aware merge (no model);
* ``judged``: conflicting lines, stale beliefs, scratch notes worth their own file (one model call);
* ``proposals``: the stored proposals (``<root>/.hygiene/proposals.json``), each with its exact changes;
* ``run``: one pass (``run_hygiene``), the ``memory_hygiene`` job's body;
* ``apply``: accept (through the guarded store, audited, only if no file changed since) or reject.

The surfaces are ``/tidy`` (``plugins/hygiene.py``), the console's Tidy view and
``/api/users/{uid}/hygiene`` (``gateway/http/api/hygiene.py``). See docs/memory.md.
"""
