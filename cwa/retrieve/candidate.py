"""One search candidate: a piece of evidence in one document, with what the policies need."""

from __future__ import annotations

from dataclasses import dataclass, field

import apsw

from cwa.index.terms import tokens
from cwa.store.reads import window_text


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
    reranked: bool = False  # scored by the cross-encoder (order only; `score` is unchanged)

    @classmethod
    def of_window(cls, mode: str, match_type: str, score: float, raw: float, row: int, ordinal: int,
                  start: int, end: int, content_hash: str, evidence: "WindowEvidence", **extra) -> "Candidate":
        """A candidate whose evidence is one window (lexical, semantic, neighbour)."""
        return cls(mode=mode, document_row=row, match_type=match_type, score=score, raw=raw, start=start, end=end,
                   window=ordinal, matched=evidence.matched, coverage=evidence.coverage, text=evidence.text,
                   center=evidence.center, alias=content_hash, **extra)


@dataclass(frozen=True)
class WindowEvidence:
    text: str  # the window's message text, as the lexical index saw it
    matched: list[str]  # the query terms it holds, in query order
    coverage: float
    center: int  # character offset of the first matched term (0 when none)


def window_evidence(
    conn: apsw.Connection, row: int, start: int, end: int, first: int, last: int, qterms: list[str]
) -> WindowEvidence:
    """A window's text and what of the query it holds: the evidence every mode's candidate carries."""
    text = window_text(conn, row, start, end, first, last)
    window_tokens = list(tokens(text))
    present = {t.term for t in window_tokens}
    matched = [t for t in qterms if t in present]
    wanted = set(matched)
    center = next((t.start for t in window_tokens if t.term in wanted), 0)
    coverage = round(len(matched) / len(qterms), 4) if qterms else 0.0
    return WindowEvidence(text, matched, coverage, center)
