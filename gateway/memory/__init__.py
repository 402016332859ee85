"""Memory: the Markdown files (the source of truth) and everything built on them, one subpackage per concept.

``files/`` is the guarded Markdown store; ``search/`` the rebuildable index and recall over it;
``knowledge/`` the temporal knowledge graph; ``curation/`` USER.md curation by operations; ``background/``
the stages that run as bus jobs (writer, sleep cycle, distillation, retention, compaction). Dependencies
point one way: ``files`` and ``curation`` import no other subpackage, ``search`` and ``knowledge`` build on
``files`` (or on nothing), and only ``background`` combines them all. Import submodules explicitly
(``from gateway.memory.files.store import MemoryStore``): importing this package must stay cheap, because
the index pulls in onnxruntime and qdrant.
"""
