"""Conversation neighbours: the turn next to a hit is often the rest of the answer.

A question's evidence is often spread over consecutive documents of one session — the request
and the reply, the question and the follow-up. Inside the lexical/semantic tier, each candidate
is worth 1/(RANK_K + rank) of the fused order; a candidate whose document sits right before or
after another candidate's, in the same session, also gains `share` of that neighbour's worth times
the neighbour's calibrated score (a weak hit lends little); and
the live, in-scope, not-visible neighbours of the best candidates join the tier on that share
alone (mode `neighbor`, their own calibrated evidence as `score`, possibly 0). Order only: the
presented scores never change; exact and structural hits are never touched.

On LoCoMo (docs/evaluation.md, mode `neighbors`) this is what lifts recall most; a share of 0
(the `neighborCredit` default) turns it off.
"""

from __future__ import annotations

import orjson

from cwa.retrieve import calibration
from cwa.retrieve.candidate import Candidate
from cwa.retrieve.context import Context
from cwa.retrieve.windows import WindowRow, admissible, window_candidate, window_evidence
from cwa.store.sqlfiles import queries

RANK_K = 2


def worth(rank: int) -> float:
    return 1.0 / (RANK_K + rank)


def reorder(
    ctx: Context, tier: list[Candidate], qterms: list[str], limit: int, taken: set[int], share: float
) -> list[Candidate]:
    """The tier with neighbour credit, best first (stable: ties keep the fused order)."""
    if share <= 0 or not tier:
        return tier
    head = tier[: limit + 1]  # only these can lift a neighbour onto the page
    found = ctx.conn.execute(
        queries("ranking")["session_neighbors"], {"rows": orjson.dumps([c.document_row for c in head]).decode()}
    ).fetchall()
    value = {c.document_row: worth(rank) for rank, c in enumerate(tier, 1)}
    outside = {}  # a neighbour not in the tier → its window nearest the hit
    for _, before_row, before_window, after_row, after_window in found:
        for row, window in ((before_row, before_window), (after_row, after_window)):
            if row is not None and window is not None and row not in value and row not in taken:
                outside.setdefault(row, window)
    admissible = admissible_neighbors(ctx, outside)
    lent = {c.document_row: share * value[c.document_row] * c.score for c in head}
    credit = dict(value)
    for hit, before_row, _, after_row, _ in found:
        for row in (before_row, after_row):
            if row in value or row in admissible:
                credit[row] = credit.get(row, 0.0) + lent[hit]
    ranked = sorted(credit, key=lambda row: -credit[row])
    in_tier = {c.document_row: c for c in tier}
    shown = {row: admissible[row] for row in ranked[: limit + 1] if row not in in_tier}
    added = neighbor_candidates(ctx, shown, qterms)
    return [in_tier.get(row) or added[row] for row in ranked if row in in_tier or row in added]


def admissible_neighbors(ctx: Context, windows: dict[int, int]) -> dict[int, WindowRow]:
    """Of the neighbours' windows, those live, in scope and not visible, by document row."""
    return {r.document_row: r for r in admissible(ctx, dict.fromkeys(windows.values(), 0.0))}


def neighbor_candidates(ctx: Context, windows: dict[int, WindowRow], qterms: list[str]) -> dict[int, Candidate]:
    """Candidates for admissible neighbour windows, with their own evidence."""
    found: dict[int, Candidate] = {}
    for row, window in windows.items():
        evidence = window_evidence(ctx.conn, window, qterms)
        found[row] = window_candidate(
            "neighbor",
            "neighbor",
            calibration.lexical_score(qterms, evidence.matched),
            0.0,
            window,
            evidence,
            modes=["neighbor"],
        )
    return found
