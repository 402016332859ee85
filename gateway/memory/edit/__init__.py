"""A person's own edits of their memory: ``/remember``, ``/forget`` and ``/forget undo``.

``remember`` keeps one line in ``REMEMBERED.md``; ``forget`` finds what a text means (``match``: the
literal lines and facts, and those that match by meaning) and removes it from the files, the graph,
the index and the transcript; ``undo`` keeps what a forget removed so it can be put back. The plugin
``plugins/remember.py`` and the memory tools call them (docs/memory.md, "Remembering and forgetting").
Built on ``files``, ``search`` (re-indexing, semantic matches) and ``knowledge`` (facts); nothing below
imports it.
"""
