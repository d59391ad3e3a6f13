"""Semantic candidates: windows whose embedding is nearest the query's, in scope, in SQL.

The nearest embedded contents of the project come from a shortlist by the Hamming distance of
their sign bits (48 bytes a vector), rescored with the int8 vectors (384 bytes), in SQL (sql/
semantic.sql `nearest`); those contents' windows are then kept, in SQL, when live, in scope and
not visible (cwa/retrieve/windows.py widens the batch until enough pass). Anything that keeps the model from answering (not installed, failing, vectors
of another model) yields None: search then stays lexical.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from cwa.index import semantic as semantic_index
from cwa.model_variants import active
from cwa.models import ModelUnavailable, embedder
from cwa.retrieve import calibration
from cwa.retrieve.candidate import Candidate
from cwa.retrieve.context import Context
from cwa.retrieve.windows import best_admissible, distinct_candidates, window_candidate, window_evidence
from cwa.store.sqlfiles import queries

if TYPE_CHECKING:
    import numpy as np

SEMANTIC_POOL = 40  # nearest contents asked for first (at least 8 × limit)
MAX_K = 4096  # nearest contents asked for at most, however far the batch widens


def query_vector(ctx: Context, query: str) -> np.ndarray | None:
    """The query's embedding; None when the embeddings cannot answer (not installed, failing,
    nothing embedded yet, or vectors of another model: never mixed)."""
    stored = semantic_index.stored_fingerprint(ctx.conn)
    try:
        files = active(ctx.conn.filename)
        # the earlier recipe's vectors answer a query as well until the archive adopts this one
        if stored is None or stored not in (files.fingerprint, files.earlier_fingerprint):
            return None
        model = embedder(files)
    except ModelUnavailable:
        return None
    try:
        return model.embed([query])[0]
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
