"""Near-duplicate collapsing: three runs of the same test output are one result, not three.

Exact copies are already one result (same window bytes or same document text). Near copies — the
same log with other timestamps, ids or durations — are caught by comparing the windows' sets of
consecutive word pairs, letters only, so numbers and ids that change between runs do not count: two windows
whose pair sets overlap by at least MIN_JACCARD are the same evidence, and the better-ranked one
stays. Pairs whose sizes alone rule out the overlap are not intersected, so a pool of a hundred
candidates costs little.
"""

from __future__ import annotations

import re

from cwa.retrieve.candidate import Candidate

MIN_JACCARD = 0.8
MIN_TERMS = 8  # shorter texts are too small to judge: never collapsed
_WORD = re.compile(r"[^\W\d_]+")  # letters only: numbers, ids and punctuation change between runs


def signature(text: str) -> frozenset[tuple[str, str]] | None:
    """The set of consecutive pairs of the text's words (letters only, case-folded), or None when
    the text is short."""
    words = _WORD.findall(text.casefold())
    if len(words) < MIN_TERMS:
        return None
    return frozenset(zip(words, words[1:]))


def similar(a: frozenset, b: frozenset) -> bool:
    """Jaccard ≥ MIN_JACCARD. It is at most min/max of the sizes, so sets of very different sizes
    are told apart without intersecting them (most pairs of a large pool)."""
    small, large = sorted((len(a), len(b)))
    if small < MIN_JACCARD * large:
        return False
    common = len(a & b)
    return common >= MIN_JACCARD * (small + large - common)


def collapse(candidates: list[Candidate]) -> list[Candidate]:
    """Candidates in the same order, without those nearly identical to a better-ranked one."""
    kept: list[Candidate] = []
    seen: list[frozenset] = []
    for candidate in candidates:
        found = signature(candidate.text) if candidate.text else None
        if found is not None and any(similar(found, other) for other in seen):
            continue
        kept.append(candidate)
        if found is not None:
            seen.append(found)
    return kept
