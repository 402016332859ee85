"""Search: the rebuildable index over the Markdown files and the one read path into it.

Here live chunking (``chunk``), embeddings (``embed``, with the ONNX rewrite in ``onnx_graph``), BM25
sparse vectors (``sparse``), the vector-index interface and its two Qdrant backends (``index``,
``index_edge``, ``index_client``), the indexer that keeps the index in step with the files
(``indexer``), hybrid recall and its prompt section (``recall``, ``recall_context``), and the service
the gateway holds: the index queue (``queue``) with its disk floor (``pause``), the embedder and index
load (``loading``), and ``MemoryService`` (``service``), which builds those with the stores and runs
recall. It may import ``gateway.memory.files``, ``gateway.memory.settings`` and the host's leaf modules
(``config``, ``context``, ``diskspace``, ``turngate``, ``types``); never ``knowledge``, ``background``,
``edit``, the database, the bus or the plugin loader.
"""
