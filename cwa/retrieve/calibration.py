"""Calibrated scores and bands: fixed formulas of one candidate's own evidence.

A score never depends on the other candidates of a result list (no "top result = 1.0") nor on
how many other documents the archive holds, so a weak hit stays weak when it ranks first and a
candidate's score is the same whatever else is found.

- exact:      the anchor type's specificity; a case-folded match counts 0.9 of it.
- structural: the cue score; with a query, times (0.5 + 0.5 × term coverage) of the message.
- lexical:    coverage × (1 − e^(−evidence)), where coverage is the share of query terms the
              window matched and evidence sums a prior of each matched term's own specificity
              (longer terms, numbers and whole identifiers say more than short common words).
- semantic:   (cosine similarity − 0.2) / 0.6, clamped to [0, 1]: for all-MiniLM-L6-v2, unrelated
              texts sit below 0.2, related ones around 0.5, paraphrases at 0.8 and above.
"""

from __future__ import annotations

import functools
import math

FOLDED_FACTOR = 0.9


def band(score: float) -> str:
    if score >= 0.8:
        return "high"
    if score >= 0.5:
        return "moderate"
    if score >= 0.2:
        return "some"
    return "low"


def term_prior(term: str) -> float:
    """How much one matched term says on its own, from its shape alone."""
    if any(c.isdigit() for c in term) or "_" in term or len(term) >= 9:
        return 1.0
    if not term.isascii():
        return 0.8 if len(term) > 1 else 0.5
    if len(term) >= 6:
        return 0.8
    if len(term) >= 4:
        return 0.6
    return 0.4


def lexical_score(query_terms: list[str], matched: list[str]) -> float:
    if not query_terms:
        return 0.0
    return lexical_score_of(len(matched) / len(query_terms), matched)


def lexical_score_of(coverage: float, matched: list[str]) -> float:
    evidence = sum(term_prior(t) for t in matched)
    return round(coverage * (1 - math.exp(-evidence)), 4)


SEMANTIC_FLOOR = 0.2
SEMANTIC_SPAN = 0.6


def semantic_score(similarity: float) -> float:
    return round(min(1.0, max(0.0, (similarity - SEMANTIC_FLOOR) / SEMANTIC_SPAN)), 4)


def exact_score(specificity: float, folded: bool) -> float:
    return round(specificity * (FOLDED_FACTOR if folded else 1.0), 4)


def structural_score(cue_score: float, coverage: float | None) -> float:
    if coverage is None:
        return round(cue_score, 4)
    return round(cue_score * (0.5 + 0.5 * coverage), 4)


def idf(document_frequency: int, total: int) -> float:
    """BM25's IDF, always positive."""
    return math.log(1 + (total - document_frequency + 0.5) / (document_frequency + 0.5))


def normalized_idf(document_frequency: int, total: int) -> float:
    """IDF divided by the IDF of a term found in one window: in [0, 1]."""
    if total <= 0 or document_frequency <= 0:
        return 0.0
    return round(min(1.0, idf(document_frequency, total) / idf(1, max(total, 1))), 4)


SPECIFICITY_REFERENCE_WINDOWS = 8_192  # about LoCoMo's 5,882 windows, where the hint gates were set


def specificity(document_frequency: int, total: int) -> float:
    """How specific a term is, for the hint gates: its normalized IDF as an archive of at most
    SPECIFICITY_REFERENCE_WINDOWS windows measures it. Normalized IDF grows stricter as the archive
    grows (a term must be in about 2% of a thousand windows but 0.03% of a million to pass 0.6), so
    gates on it would fall silent as history accumulates; past the reference size this keeps the
    same share of windows (about 0.6% at 0.6) at any size. Equal to `normalized_idf` up to it."""
    if total <= 0 or document_frequency <= 0:
        return 0.0
    reference = min(max(total, 1), SPECIFICITY_REFERENCE_WINDOWS)
    return round(min(1.0, idf(document_frequency, total) / idf(1, reference)), 4)


@functools.lru_cache(maxsize=256)
def most_specific_windows(total: int, threshold: float) -> int:
    """The most windows a term can be in and still be `threshold` specific among `total` (the
    inverse of `specificity`): a count may stop there. Kept per (total, threshold): every term of
    a query asks it of the same scope."""
    if total <= 0:
        return 0
    odds = math.exp(threshold * idf(1, min(total, SPECIFICITY_REFERENCE_WINDOWS))) - 1
    most = max(0, math.floor((total + 0.5 - 0.5 * odds) / (1 + odds)))
    while specificity(most + 1, total) >= threshold:  # `specificity` rounds: agree with it exactly
        most += 1
    while most and specificity(most, total) < threshold:
        most -= 1
    return most
