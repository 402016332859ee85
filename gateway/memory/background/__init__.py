"""The background memory stages, run as bus jobs by the plugins in ``plugins/`` (docs/jobs.md).

Here live the memory writer (``writer``), the nightly sleep cycle (``sleep``, reading the day through
``daybook``), distillation tiers (``distill``), compaction into working memory (``compaction``), the
retention cutoff rule (``retention_cutoff``) and the retention job that applies it (``retention_job``),
the parser for what their models write (``model_output``), where a job's work lands (``jobscope``) and
their one model call (``ask``); their persistent progress is the state's (``State.writer_progress``,
``sleep_runs``, ``distill_runs``, ``retention``). The top layer of memory: it may import every other
memory subpackage, ``gateway.state``, ``gateway.config`` and the host's leaf modules; nothing in memory
imports it, and it never imports plugins.
"""
