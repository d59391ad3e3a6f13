"""Semantic candidates: windows whose embedding is nearest the query's, in scope, in SQL.

The nearest embedded contents of the project come from a shortlist by the Hamming distance of
their sign bits (48 bytes a vector), rescored with the int8 vectors (384 bytes), in SQL (sql/
semantic.sql `nearest`); those contents' windows are then kept, in SQL, when live, in scope and
not visible (cwa/retrieve/windows.py widens the batch until enough pass). Anything that keeps the model from answering (not installed, failing, vectors
of another model) yields None: search then stays lexical.

A search that asks for embeddings up front (`semanticPolicy: always`) starts the query's
embedding and its first shortlist (`Ahead`) on a worker thread with its own read-only
connection, while the request's thread runs the exact and lexical search: the model and numpy
run beside SQLite on a second core instead of after it. The results are the same as computed in
turn; anything the worker cannot do is done in turn.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

import apsw
import orjson

from cwa.index import semantic as semantic_index
from cwa.model_variants import active
from cwa.models import ModelUnavailable, embedder
from cwa.retrieve import calibration
from cwa.retrieve.candidate import Candidate
from cwa.retrieve.context import Context
from cwa.retrieve.windows import best_admissible, distinct_candidates, window_candidate, window_evidence
from cwa.store.connection import open_read_only
from cwa.store.sqlfiles import queries

if TYPE_CHECKING:
    import numpy as np

SEMANTIC_POOL = 40  # nearest contents asked for first (at least 8 × limit)
MAX_K = 4096  # nearest contents asked for at most, however far the batch widens


def query_vector(ctx: Context, query: str) -> np.ndarray | None:
    """The query's embedding; None when the embeddings cannot answer (not installed, failing,
    nothing embedded yet, or vectors of another model: never mixed)."""
    return _embedding(ctx.conn, query)


def _embedding(conn: apsw.Connection, query: str) -> np.ndarray | None:
    stored = semantic_index.stored_fingerprint(conn)
    try:
        files = active(conn.filename)
        if stored is None or files.fingerprint != stored:
            return None
        model = embedder(files)
    except ModelUnavailable:
        return None
    try:
        return model.embed([query])[0]
    except Exception:  # a failing model degrades to the lexical result
        return None


def first_batch(size: int) -> int:
    """The nearest contents `semantic_candidates` asks for first, for `size` candidates."""
    return max(SEMANTIC_POOL, 8 * size)


_WORKER: ThreadPoolExecutor | None = None
_WORKER_LOCK = threading.Lock()


class Ahead:
    """The query's embedding and the shortlist of its first batch, computed on the worker thread
    (one per process) with a read-only connection of its own, opened for the request."""

    def __init__(self, path: str, project_row: int | None, query: str, size: int) -> None:
        global _WORKER
        with _WORKER_LOCK:
            if _WORKER is None:
                _WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cwa-semantic")
        self.future: Future = _WORKER.submit(
            _embed_and_shortlist, path, project_row, query, min(first_batch(size), MAX_K)
        )

    def result(self) -> tuple[np.ndarray | None, semantic_index.Shortlist | None] | None:
        """(embedding or None, its shortlist); None when the worker failed (then compute in turn)."""
        try:
            return self.future.result()
        except Exception:
            return None


def _embed_and_shortlist(
    path: str, project_row: int | None, query: str, k: int
) -> tuple[np.ndarray | None, semantic_index.Shortlist | None]:
    conn = open_read_only(path)
    try:
        vector = _embedding(conn, query)
        return vector, None if vector is None else semantic_index.shortlist(conn, project_row, vector, k)
    finally:
        conn.close()


def semantic_candidates(
    ctx: Context,
    embedded: np.ndarray,
    qterms: list[str],
    limit: int,
    taken: set[int],
    shortlisted: semantic_index.Shortlist | None = None,
) -> list[Candidate]:
    """Candidates by cosine similarity to the query's embedding (`query_vector`), best first,
    one per document; `shortlisted`, the first batch's shortlist when read already (`Ahead`)."""
    conn = ctx.conn

    def nearest(k: int) -> tuple[dict[int, float], bool]:
        found = semantic_index.nearest_contents(
            conn, ctx.scope.project_row, embedded, min(k, MAX_K), shortlisted=shortlisted
        )
        similarity = {row: 1.0 - distance for row, distance in found}
        holders = conn.execute(
            queries("semantic")["windows_of_contents"], {"ids": orjson.dumps(list(similarity)).decode()}
        )
        return {window: similarity[content] for content, window in holders}, len(similarity) < k or k >= MAX_K

    rows = best_admissible(ctx, nearest, first_batch(limit), limit, taken)
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
