"""One search candidate: a piece of evidence in one document, with what the policies need."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Candidate:
    mode: str  # exact | structural | lexical | semantic
    document_row: int
    match_type: str
    score: float
    raw: float
    start: int  # byte range of the evidence in the document
    end: int
    window: int | None = None
    message: int | None = None
    matched: list[str] = field(default_factory=list)
    coverage: float = 0.0
    max_idf: float = 0.0
    text: str = ""  # the evidence text the snippet is cut from
    center: int = 0  # character offset of the match in `text`
    order: float = 0.0
    alias: str | None = None  # window content hash: identical windows are one result
    anchors: list[str] = field(default_factory=list)  # exact: the query's anchors it holds, as typed
    modes: list[str] = field(default_factory=list)  # lexical tier: the modes that found it (fusion)
    occurrences: dict[str, int] = field(default_factory=dict)  # window candidates: matched term counts
    reranked: bool = False  # scored by the cross-encoder (order only; `score` is unchanged)
    # window candidates: what the learned ranker reads (cwa/retrieve/ranker.py)
    window_id: int | None = None
    session_row: int | None = None
    kind: str = ""
    bm25: float = 0.0  # BM25F relevance (−bm25()), when BM25F found it
    similarity: float = 0.0  # cosine similarity to the query, when the embeddings found it
