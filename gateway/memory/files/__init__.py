"""The Markdown files: one guarded store per root, and what reads, writes and screens their contents.

Here live the store every write goes through (``store``, on the race-free primitives of ``guarded_fs``,
with its ``audit`` log and typed ``errors``), every scope's store built in one place with its on-write
subscribers (``stores``), the scope names and the root each owns (``scopes``), which files the index
reads (``kinds``), the session-log format (``session_log``), the working-memory file (``working``), the
file watcher (``watch``), user-tree merges (``treemerge``), and the poisoning screen (``poison``) with
the ``quarantine`` that keeps what it flags. The bottom layer of memory: it may import the standard
library, ``gateway.memory.settings`` and the host's leaf helpers (``gateway.types``, ``gateway.util.jsonl``);
never another memory subpackage, the turn path (``gateway.turn``), the config, the database, the bus
or the models (tests/core/test_import_rules.py).
"""
