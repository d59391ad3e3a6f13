"""The importance prior: a query-independent nudge for documents that matter more than others.

Explicit search and gather only (never preflight). From the document alone: a pin, a decision
(a decision document, or a message with the decision cue), its supersession depth (how many
versions replaced one another to reach it), its source breadth (how many source messages it
gathers) and the live recall counter (how often a locator a search handed out was recalled —
the relevance-feedback log, read at query time). The prior multiplies the candidate's fused key,
so it reorders near-ties only: it is at most CAP, and a candidate more than 15% behind stays
behind. The presented `score` never changes.
"""

from __future__ import annotations

import math
from dataclasses import replace

import apsw
import orjson

from cwa.retrieve.candidate import Candidate
from cwa.store.sqlfiles import queries

CAP = 1.15
PIN = 0.06
DECISION = 0.04
DEPTH_PER_VERSION = 0.02  # up to MAX_DEPTH
MAX_DEPTH = 0.04
BREADTH_PER_DOUBLING = 0.01  # per doubling of source messages beyond one, up to MAX_BREADTH
MAX_BREADTH = 0.03
RECALL_PER_DOUBLING = 0.02  # per doubling of recalls, up to MAX_RECALL
MAX_RECALL = 0.06


def prior(pinned: bool, decision: bool, version: int, source_keys: int, recalls: int) -> float:
    """The multiplier of one document, in [1, CAP]."""
    bonus = PIN * pinned + DECISION * decision
    bonus += min(MAX_DEPTH, DEPTH_PER_VERSION * max(0, version - 1))
    bonus += min(MAX_BREADTH, BREADTH_PER_DOUBLING * math.log2(max(1, source_keys)))
    bonus += min(MAX_RECALL, RECALL_PER_DOUBLING * math.log2(1 + recalls))
    return min(CAP, 1.0 + bonus)


def priors(conn: apsw.Connection, rows: list[int]) -> dict[int, float]:
    found = conn.execute(queries("ranking")["importance_signals"], {"rows": orjson.dumps(rows).decode()})
    return {
        row: prior(bool(pinned), bool(decision) or kind == "decision", version, keys, recalls)
        for row, pinned, kind, version, keys, decision, recalls in found
    }


def reorder(conn: apsw.Connection, tier: list[Candidate]) -> list[Candidate]:
    """The tier by fused key × prior, best first; ties keep their order (stable sort)."""
    if len(tier) < 2:
        return tier
    multiplier = priors(conn, [c.document_row for c in tier])
    scaled = [replace(c, order=c.order * multiplier.get(c.document_row, 1.0)) for c in tier]
    return sorted(scaled, key=lambda c: -c.order)
