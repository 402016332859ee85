"""Memory: guarded Markdown store (the source of truth) and the rebuildable search index over it.

Import submodules explicitly (``from gateway.memory.store import MemoryStore``): importing this
package must stay cheap, because the index pulls in onnxruntime and qdrant.
"""
