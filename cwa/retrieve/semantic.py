"""Semantic candidates: windows whose embedding is nearest the query's, in scope, in SQL.

The nearest embedded contents of the project come from a shortlist by the Hamming distance of
their sign bits (48 bytes a vector), rescored with the int8 vectors (384 bytes), in SQL (sql/
semantic.sql `nearest`); those contents' windows are then kept, in SQL, when live, in scope and
not visible (cwa/retrieve/windows.py widens the batch until enough pass). Anything that keeps the model from answering (not installed, failing, vectors
of another model) yields None: search then stays lexical.

The model reads the query without its words found in more than half of the scope's windows, or
of the windows around lexical search's best candidates (`embedded_query`): BM25 gives the first
no weight, lexical search has already used the second to find where the answer lies, and in a
short query's mean-pooled embedding either would weigh as much as the words that tell the
windows there apart (a chat whose every turn begins with its speaker's name, asked about one of
them by name, whether the chat is the whole project or one part of a long one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import orjson

from cwa.index import semantic as semantic_index
from cwa.index.terms import fts_phrase, terms
from cwa.model_variants import active
from cwa.models import ModelUnavailable, embedder
from cwa.retrieve import calibration
from cwa.retrieve.candidate import Candidate
from cwa.retrieve.context import Context, frequencies, scope_frequencies, scope_windows
from cwa.retrieve.windows import best_admissible, distinct_candidates, window_candidate, window_evidence
from cwa.store.sqlfiles import queries

if TYPE_CHECKING:
    import numpy as np

SEMANTIC_POOL = 40  # nearest contents asked for first (at least 8 × limit)
MAX_K = 4096  # nearest contents asked for at most, however far the batch widens


COMMON_SHARE = 0.5  # a word in more than this share of the scope's windows is not embedded
COMMON_MIN_WINDOWS = 20  # with fewer windows in scope a word's share says little: all are kept
NEAR_CANDIDATES = 3  # the best lexical candidates whose sessions' windows around them are counted
NEAR_SPAN = 128  # window ids either side of such a candidate counted, at most (its session's only)


def embedded_query(ctx: Context, query: str, near: Sequence[tuple[int, int]] = ()) -> str:
    """The query as the embedding model reads it: without the words whose terms are in more than
    COMMON_SHARE of the scope's windows, or of the windows around `near` (lexical search's best
    candidates, as (window id, session row), best first: `common_near`); the whole query when
    that would leave nothing."""
    words = query.split()
    word_terms = [terms(word) for word in words]
    distinct = list(dict.fromkeys(t for found in word_terms for t in found))
    if not distinct:
        return query
    common = common_in_scope(ctx, distinct) | common_near(ctx, distinct, near)
    if not common:
        return query
    kept = [word for word, found in zip(words, word_terms) if not common.intersection(found)]
    return " ".join(kept) if kept else query


def common_in_scope(ctx: Context, distinct: list[str]) -> set[str]:
    """The terms in more than COMMON_SHARE of the scope's windows (none in a scope of fewer than
    COMMON_MIN_WINDOWS). A term the whole archive holds no more often than that is not counted
    in the scope."""
    size = scope_windows(ctx)
    if size < COMMON_MIN_WINDOWS:
        return set()
    most = int(size * COMMON_SHARE)
    archive, _ = frequencies(ctx, distinct)
    candidates = [t for t in distinct if archive[t] > most]
    if not candidates:
        return set()
    df, _ = scope_frequencies(ctx, candidates, cap=most + 1)
    return {t for t in candidates if df[t] > most}


def near_candidates(candidates: Sequence[Candidate]) -> list[tuple[int, int]]:
    """Lexical candidates as `common_near` reads them, best first: (window id, session row)."""
    return [(c.window_id, c.session_row) for c in candidates if c.window_id is not None and c.session_row is not None]


def common_near(ctx: Context, distinct: list[str], near: Sequence[tuple[int, int]]) -> set[str]:
    """The terms in more than COMMON_SHARE of the windows around the best lexical candidates: each
    candidate's session's live windows within NEAR_SPAN ids of it, candidate after candidate (at
    most NEAR_CANDIDATES, one a session) until COMMON_MIN_WINDOWS are counted; none with fewer."""
    sql = queries("semantic")
    spans: list[dict[str, int]] = []
    total, sessions = 0, set()
    for window, session in near[:NEAR_CANDIDATES]:
        if session in sessions:
            continue
        sessions.add(session)
        span = {"low": window - NEAR_SPAN, "high": window + NEAR_SPAN, "session": session}
        total += ctx.conn.execute(sql["near_windows"], span).fetchone()[0]
        spans.append(span)
        if total >= COMMON_MIN_WINDOWS:
            break
    if total < COMMON_MIN_WINDOWS:
        return set()
    most = int(total * COMMON_SHARE)
    archive, _ = frequencies(ctx, distinct)  # a term no more common in the archive is not counted
    found = set()
    for term in (t for t in distinct if archive[t] > most):
        held = sum(
            ctx.conn.execute(sql["near_term_windows"], {"term": fts_phrase(term), **span}).fetchone()[0]
            for span in spans
        )
        if held > most:
            found.add(term)
    return found


class QueryEmbedding(NamedTuple):
    vector: np.ndarray
    text: str  # what the model read (`embedded_query`)


def query_vector(ctx: Context, query: str, near: Sequence[tuple[int, int]] = ()) -> QueryEmbedding | None:
    """The query's embedding and the text it is of (`embedded_query`, `near` the best lexical
    candidates); None when the embeddings cannot answer (not installed, failing, nothing embedded
    yet, or vectors of another model: never mixed)."""
    stored = semantic_index.stored_fingerprint(ctx.conn)
    try:
        files = active(ctx.conn.filename)
        # the earlier recipe's vectors answer a query as well until the archive adopts this one
        if stored is None or stored not in (files.fingerprint, files.earlier_fingerprint):
            return None
        model = embedder(files)
    except ModelUnavailable:
        return None
    text = embedded_query(ctx, query, near)  # an archive error here is not the model's: it is raised
    try:
        return QueryEmbedding(model.embed([text])[0], text)
    except Exception:  # a failing model degrades to the lexical result
        return None


def semantic_candidates(
    ctx: Context, embedded: np.ndarray, qterms: list[str], limit: int, taken: set[int]
) -> list[Candidate]:
    """Candidates by cosine similarity to the query's embedding (`query_vector`), best first,
    one per document."""
    conn = ctx.conn

    def nearest(k: int) -> tuple[dict[int, float], bool]:
        similarity = {
            row: 1.0 - distance
            for row, distance in semantic_index.nearest_contents(conn, ctx.scope.project_row, embedded, min(k, MAX_K))
        }
        holders = conn.execute(
            queries("semantic")["windows_of_contents"], {"ids": orjson.dumps(list(similarity)).decode()}
        )
        nearest_piece: dict[int, float] = {}  # a window is as near as its nearest piece
        for content, window in holders:
            nearest_piece[window] = max(nearest_piece.get(window, -1.0), similarity[content])
        return nearest_piece, len(similarity) < k or k >= MAX_K

    rows = best_admissible(ctx, nearest, max(SEMANTIC_POOL, 8 * limit), limit, taken)
    return distinct_candidates(
        rows,
        taken,
        limit,
        lambda window: window_candidate(
            "semantic",
            "semantic",
            calibration.semantic_score(window.score),
            round(window.score, 4),
            window,
            window_evidence(conn, window, qterms),
            similarity=window.score,
        ),
    )
