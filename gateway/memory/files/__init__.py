"""The Markdown files: one guarded store per root, and what reads, writes and screens their contents.

Here live the store every write goes through (``store``, on the race-free primitives of ``guarded_fs``,
with its ``audit`` log and typed ``errors``), the scope names and the root each owns (``scopes``), the
session-log format (``session_log``), the working-memory file (``working``), user-tree merges
(``treemerge``), and the poisoning screen (``poison``) with the ``quarantine`` that keeps what it flags.
The bottom layer of memory: it may import the standard library and the host's leaf helpers
(``gateway.turn.budget``, ``gateway.util.jsonl``), never another memory subpackage, the database or the bus.
"""
