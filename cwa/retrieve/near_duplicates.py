"""Near-duplicate collapsing: three runs of the same test output are one result, not three.

Exact copies are already one result (same window bytes or same document text). Near copies — the
same log with other timestamps, ids or durations — are caught by a 64-bit SimHash over the window's
terms, where numbers and opaque tokens (which differ between runs) are left out: two windows whose
fingerprints differ in at most MAX_DISTANCE bits are the same evidence, and the better-ranked one
stays.
"""

from __future__ import annotations

import hashlib
from collections import Counter

from cwa.index.terms import terms
from cwa.retrieve.candidate import Candidate

MAX_DISTANCE = 3
MIN_TERMS = 8  # shorter texts are too small for a stable fingerprint: never collapsed


def _stable(term: str) -> bool:
    """Terms that stay the same between runs of the same output (no digits, not hex-like)."""
    return not any(c.isdigit() for c in term)


def simhash(text: str) -> int | None:
    counts = Counter(t for t in terms(text) if _stable(t))
    if sum(counts.values()) < MIN_TERMS:
        return None
    weights = [0] * 64
    for term, count in counts.items():
        bits = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "big")
        for i in range(64):
            weights[i] += count if bits >> i & 1 else -count
    return sum(1 << i for i in range(64) if weights[i] > 0)


def collapse(candidates: list[Candidate]) -> list[Candidate]:
    """Candidates in the same order, without those nearly identical to a better-ranked one."""
    kept: list[Candidate] = []
    prints: list[int] = []
    for candidate in candidates:
        fingerprint = simhash(candidate.text) if candidate.text else None
        if fingerprint is not None and any(bin(fingerprint ^ p).count("1") <= MAX_DISTANCE for p in prints):
            continue
        kept.append(candidate)
        if fingerprint is not None:
            prints.append(fingerprint)
    return kept
