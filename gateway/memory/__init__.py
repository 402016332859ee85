"""Memory: the Markdown files (the source of truth) and everything built on them, one subpackage per concept.

``files/`` is the guarded Markdown store (every scope's store built in ``files.stores``); ``search/`` the
rebuildable index, its queue and recall over it (``search.service.MemoryService`` is what the gateway
holds); ``edit/`` a person's own remember, forget and undo; ``knowledge/`` the temporal knowledge graph;
``curation/`` USER.md curation by operations; ``background/`` the stages that run as bus jobs (writer,
sleep cycle, distillation, retention, compaction) and ``hygiene/`` the weekly housekeeping one. At the top:
``settings`` (the ``memory:`` section) and ``session_writer`` (the session-log writer). Dependencies point
one way: ``files`` and ``curation`` import no other subpackage, ``search`` and ``knowledge`` build on
``files`` (or on nothing), ``edit`` on those three, and only ``background`` (with ``hygiene``) combines
them all; nothing here names a plugin (tests/core/test_import_rules.py). Import submodules explicitly
(``from gateway.memory.files.store import MemoryStore``): importing this package must stay cheap, because
the index pulls in onnxruntime and qdrant.
"""
