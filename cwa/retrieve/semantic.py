"""Semantic candidates: windows whose embedding is nearest the query's, in scope, in SQL.

Phase 1 asks sqlite-vec for the nearest embedded contents across the archive; phase 2 joins them
to their windows and keeps, in SQL, those that are live, in scope and not visible. Until more than
`limit` new documents pass, the next, four times larger batch is asked for (or the vectors run
out), so scope never becomes a filter on a global top-k in Python. Anything that keeps the model
from answering (not installed, failing, vectors of another model) yields None: search then stays
lexical.
"""

from __future__ import annotations

import orjson

from cwa.index import semantic as semantic_index
from cwa.model_variants import active
from cwa.models import ModelUnavailable, embedder
from cwa.retrieve import calibration
from cwa.retrieve.candidate import Candidate, window_evidence
from cwa.retrieve.search import NEAR_DUPLICATE_SLACK
from cwa.store.sqlfiles import queries

SEMANTIC_POOL = 40  # nearest contents asked for first (at least 8 × limit)
MAX_K = 4096  # sqlite-vec's largest k


def semantic_candidates(ctx, query: str, qterms: list[str], limit: int, taken: set[int]) -> list[Candidate] | None:
    """Candidates by cosine similarity, best first, one per document; None when unavailable."""
    conn = ctx.conn
    stored = semantic_index.stored_fingerprint(conn)
    try:
        files = active(conn.filename)
        if stored is None or files.fingerprint != stored:
            return None  # nothing embedded yet, or vectors of another model: never mixed
        model = embedder(files)
    except ModelUnavailable:
        return None
    try:
        vector = model.embed([query])[0].tobytes()
    except Exception:  # a failing model degrades to the lexical result
        return None
    rows = _admissible(ctx, vector, limit, taken)
    found: list[Candidate] = []
    seen_rows, seen_content = set(taken), set()
    for _, row, ordinal, start, end, first, last, content_hash, _, _, digest, similarity in rows:
        if row in seen_rows or content_hash in seen_content or digest in seen_content:
            continue
        seen_rows.add(row)
        seen_content.update((content_hash, digest))
        evidence = window_evidence(conn, row, start, end, first, last, qterms)
        found.append(Candidate.of_window(
            "semantic", "semantic", calibration.semantic_score(similarity), round(similarity, 4),
            row, ordinal, start, end, content_hash, evidence,
        ))
        if len(found) > limit + NEAR_DUPLICATE_SLACK:
            break
    return found


def _admissible(ctx, vector: bytes, limit: int, taken: set[int]) -> list[tuple]:
    """Windows of the nearest contents that pass scope, state and visibility, nearest first."""
    sql = queries("semantic")
    available = ctx.conn.execute(sql["embedded_count"]).fetchone()[0]
    available = min(available, MAX_K)
    k = min(max(SEMANTIC_POOL, 8 * limit), available)
    while k > 0:
        nearest = ctx.conn.execute(sql["nearest"], {"vector": vector, "k": k}).fetchall()
        similarity = {row: 1.0 - distance for row, distance in nearest}
        holders = ctx.conn.execute(sql["windows_of_contents"], {"ids": orjson.dumps(list(similarity)).decode()})
        closeness = {window: similarity[content] for content, window in holders}
        admissible = ctx.conn.execute(
            queries("search")["admissible_windows"],
            {"ids": orjson.dumps(list(closeness)).decode(), "visible": ctx.visible, **ctx.filters()},
        ).fetchall()
        rows = sorted((r + (closeness[r[0]],) for r in admissible), key=lambda r: (-r[-1], r[0]))
        if k >= available or len({r[1] for r in rows} - taken) > limit:
            return rows
        k = min(k * 4, available)
    return []
