"""Window rows for the lexical, semantic and neighbour candidates: ranked by a mode, kept only
when admissible, and turned into at most one candidate per document and per content.

A mode ranks windows across the whole archive on its own fastest path (FTS5's `bm25()`,
sqlite-vec's KNN); the scope, state and visibility filters then run in SQL on those window ids
(`admissible_windows` in sql/search.sql). Until more than `limit` documents not already taken
pass, the next, WIDEN times larger batch is ranked, or the mode runs out, so the rows returned are
the best admissible ones, as filtering before ranking would give them, and scope never becomes a
filter on a global top-k in Python.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple
from weakref import WeakKeyDictionary

import apsw
import orjson

from cwa.index.terms import first_start, terms
from cwa.retrieve.candidate import Candidate
from cwa.retrieve.context import NEAR_DUPLICATE_SLACK, Context
from cwa.store.reads import window_text
from cwa.store.sqlfiles import queries

WIDEN = 4  # each further batch a mode ranks is this many times larger
TERM_CACHE_WINDOWS = (
    4_096  # windows whose term counts (and, per connection, texts) are kept: a session's own turns recur
)


class WindowRow(NamedTuple):
    """One admissible window (a row of `admissible_windows`) and the score its mode gave it."""

    window_id: int
    document_row: int
    ordinal: int
    start: int
    end: int
    first_message: int
    last_message: int
    content_hash: str
    created_ms: int  # the document's creation time as stored (epoch milliseconds)
    session_row: int
    text_key: str  # the same for documents of the same text (sql/search.sql `admissible_windows`)
    kind: str
    score: float = 0.0  # higher is better: BM25F relevance, cosine similarity


# A mode's ranking for a batch size k: {window id: score, higher better}, and whether the mode
# has nothing beyond this batch.
Ranking = Callable[[int], tuple[dict[int, float], bool]]


def admissible(ctx: Context, scores: dict[int, float]) -> list[WindowRow]:
    """Of the windows in `scores`, those live, in scope and not visible, best first."""
    if not scores:
        return []
    found = ctx.conn.execute(
        queries("search")["admissible_windows"],
        {"ids": orjson.dumps(list(scores)).decode(), "visible": ctx.visible, **ctx.filters()},
    )
    rows = [WindowRow(*row, score=scores[row[0]]) for row in found]
    return sorted(rows, key=lambda r: (-r.score, r.window_id))


def best_admissible(ctx: Context, rank: Ranking, k: int, limit: int, taken: set[int]) -> list[WindowRow]:
    """The best admissible windows of a mode: widen its batch until more than `limit` documents
    not in `taken` pass, or it has no more to give."""
    while True:
        scores, exhausted = rank(k)
        rows = admissible(ctx, scores)
        if exhausted or len({r.document_row for r in rows} - taken) > limit:
            return rows
        k *= WIDEN


def distinct_candidates(
    rows: Iterable[WindowRow], taken: set[int], limit: int, make: Callable[[WindowRow], Candidate]
) -> list[Candidate]:
    """Candidates from window rows in order, one per document and per identical content (window
    bytes or document text), skipping `taken` documents; evidence is computed (by `make`) only for
    what can be shown, plus one for the margin and a few in case near copies are collapsed."""
    found: list[Candidate] = []
    seen_rows, seen_content = set(taken), set()
    for row in rows:
        if row.document_row in seen_rows or row.content_hash in seen_content or row.text_key in seen_content:
            continue
        seen_rows.add(row.document_row)
        seen_content.update((row.content_hash, row.text_key))
        found.append(make(row))
        if len(found) > limit + NEAR_DUPLICATE_SLACK:
            break
    return found


@dataclass(frozen=True)
class WindowEvidence:
    text: str  # the window's message text, as the lexical index saw it
    matched: list[str]  # the query terms it holds, in query order
    coverage: float
    center: int  # character offset of the first matched term (0 when none)
    occurrences: dict[str, int]  # how often each matched term occurs in the window


_TERMS: OrderedDict[tuple[str, int], Counter[str]] = OrderedDict()


def window_terms(content_hash: str, text: str) -> Counter[str]:
    """How often each term occurs in a window's text. Keyed by the blake3 of the window's bytes
    (and the text's length), so the same window text is tokenized once per process (LRU)."""
    key = (content_hash, len(text))
    found = _TERMS.get(key)
    if found is not None:
        _TERMS.move_to_end(key)
        return found
    counts = Counter(terms(text))
    _TERMS[key] = counts
    if len(_TERMS) > TERM_CACHE_WINDOWS:
        _TERMS.popitem(last=False)
    return counts


# Window texts each connection read lately: a document row's bytes never change (rows are never
# reused, and a gone document's windows are never admissible), and searches of one session
# revisit the same windows, so a hit spares two queries and the decoding.
_TEXTS: WeakKeyDictionary[apsw.Connection, OrderedDict[tuple[int, int, int], str]] = WeakKeyDictionary()


def cached_window_text(conn: apsw.Connection, window: WindowRow) -> str:
    return _cached_text(conn, window.document_row, window.start, window.end, window.first_message, window.last_message)


class WindowTerms(NamedTuple):
    text: str
    counts: Counter[str]  # how often each term occurs in it (`window_terms`)


def terms_of_windows(conn: apsw.Connection, ids: set[int]) -> dict[int, WindowTerms]:
    """The text and terms of each given window by id, whatever its document's state or scope (the
    turn next to a candidate, as it was said: the caller names live documents' windows)."""
    if not ids:
        return {}
    found = conn.execute(queries("search")["window_spans"], {"ids": orjson.dumps(sorted(ids)).decode()})
    read = {}
    for window, content_hash, *span in found:
        text = _cached_text(conn, *span)
        read[window] = WindowTerms(text, window_terms(content_hash, text))
    return read


def _cached_text(conn: apsw.Connection, document_row: int, start: int, end: int, first: int, last: int) -> str:
    texts = _TEXTS.setdefault(conn, OrderedDict())
    key = (document_row, start, end)
    text = texts.get(key)
    if text is not None:
        texts.move_to_end(key)
        return text
    text = window_text(conn, document_row, start, end, first, last)
    texts[key] = text
    if len(texts) > TERM_CACHE_WINDOWS:
        texts.popitem(last=False)
    return text


def window_evidence(conn: apsw.Connection, window: WindowRow, qterms: list[str]) -> WindowEvidence:
    """A window's text and what of the query it holds: the evidence every mode's candidate carries."""
    text = cached_window_text(conn, window)
    counts = window_terms(window.content_hash, text)
    matched = [t for t in qterms if t in counts]
    center = first_start(text, set(matched)) if matched else 0
    coverage = round(len(matched) / len(qterms), 4) if qterms else 0.0
    return WindowEvidence(text, matched, coverage, center, {t: counts[t] for t in matched})


def window_candidate(
    mode: str, match_type: str, score: float, raw: float, window: WindowRow, evidence: WindowEvidence, **extra
) -> Candidate:
    """A candidate whose evidence is one window (lexical, semantic, neighbour)."""
    return Candidate(
        mode=mode,
        document_row=window.document_row,
        match_type=match_type,
        score=score,
        raw=raw,
        start=window.start,
        end=window.end,
        window=window.ordinal,
        matched=evidence.matched,
        coverage=evidence.coverage,
        text=evidence.text,
        center=evidence.center,
        occurrences=evidence.occurrences,
        alias=window.content_hash,
        window_id=window.window_id,
        session_row=window.session_row,
        kind=window.kind,
        **extra,
    )
