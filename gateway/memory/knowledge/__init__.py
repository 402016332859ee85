"""The temporal knowledge graph: subject/predicate/object facts with validity windows (docs/knowledge.md).

Here live the graph's rules (``graph``: merge, supersede, replay), the predicate vocabulary and text
normalisation (``predicates``), the timestamp parsing it accepts (``timestamps``) and which facts join
the prompt (``relevance``). Its rows are stored by ``gateway.state`` (``State.knowledge``), which it
may import, and nothing else of memory: the stages that fill the graph live in ``background``.
"""
