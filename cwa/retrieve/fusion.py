"""Fusion of the lexical and semantic candidates inside their shared tier.

Reciprocal Rank Fusion over each mode's own rank order (k = 60; a semantic rank's credit is
scaled by its calibrated similarity), blended with the candidate's calibrated score: the rank
share is 75% for a candidate whose best rank is 1–3, 60% for 4–10 and 40% beyond. A candidate found by both modes accumulates rank credit from each; candidates found
by one mode only never change order among themselves (rank order within a mode). Fusion decides
order only: the presented `score` stays the candidate's own calibrated score (the better of its
modes'), and the exact and structural tiers are never touched.
"""

from __future__ import annotations

from dataclasses import replace

from cwa.retrieve.candidate import Candidate

RRF_K = 60


def rank_share(best_rank: int) -> float:
    if best_rank <= 3:
        return 0.75
    if best_rank <= 10:
        return 0.60
    return 0.40


def _confidence(candidate: Candidate) -> float:
    """How much a mode's rank is worth: a lexical rank in full; a semantic rank in proportion to
    its calibrated similarity, since the nearest vector is always somewhere, relevant or not."""
    return candidate.score if candidate.mode == "semantic" else 1.0


def fuse(*ranked_modes: list[Candidate]) -> list[Candidate]:
    """One list, best first, one candidate per document; each input is one mode's own order.
    Each candidate's `order` becomes its fused key (higher first), which the importance prior
    scales."""
    credit: dict[int, float] = {}
    best_rank: dict[int, int] = {}
    chosen: dict[int, Candidate] = {}
    modes: dict[int, list[str]] = {}
    for candidates in ranked_modes:
        for rank, candidate in enumerate(candidates, 1):
            row = candidate.document_row
            credit[row] = credit.get(row, 0.0) + _confidence(candidate) / (RRF_K + rank)
            best_rank[row] = min(best_rank.get(row, rank), rank)
            modes.setdefault(row, []).append(candidate.mode)
            if row not in chosen or candidate.score > chosen[row].score:
                chosen[row] = candidate  # the better-scored mode supplies the evidence shown
    order: dict[int, float] = {}
    for row, candidate in chosen.items():
        share = rank_share(best_rank[row])
        normalized = credit[row] * (RRF_K + 1)  # rank 1 in one mode = 1.0; in both = 2.0
        order[row] = share * normalized + (1 - share) * candidate.score
    # Candidates found by one mode only keep that mode's order among themselves: their keys are
    # handed out again, best key to best rank.
    for candidates in ranked_modes:
        alone = [c.document_row for c in candidates if len(modes[c.document_row]) == 1]
        for row, key in zip(alone, sorted((order[r] for r in alone), reverse=True)):
            order[row] = key
    ranked = sorted(chosen, key=lambda row: (-order[row], row))
    return [replace(chosen[row], modes=sorted(set(modes[row])), order=order[row]) for row in ranked]
