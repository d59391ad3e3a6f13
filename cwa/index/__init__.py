"""Derived indexes: exact anchors, BM25F windows (FTS5), structural cues and the embedding queue.

Each module implements the store's handler protocol (cwa/store/derived.py) for one index;
`handlers.default_handlers()` is the set every admission and rebuild runs. All of it is
rebuildable from the canonical rows (`cwa index rebuild`).
"""
