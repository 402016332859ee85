"""Search: the rebuildable index over the Markdown files and the one read path into it.

Here live chunking (``chunk``), embeddings (``embed``, with the ONNX rewrite in ``onnx_graph``), BM25
sparse vectors (``sparse``), the vector-index interface and its two Qdrant backends (``index``,
``index_edge``, ``index_client``), the indexer that keeps the index in step with the files
(``indexer``), hybrid recall and its prompt section (``recall``, ``recall_context``), and the
``MemoryService`` the gateway holds (``service``: stores per root, live indexing, scoped recall). It may
import ``gateway.memory.files`` and the host's leaf modules (``config``, ``context``, ``diskspace``, ``turngate``,
``types``); never ``knowledge``, ``background``, the database or the bus.
"""
