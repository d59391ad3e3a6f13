"""Query expansion from pseudo-relevance feedback (Bo1), for weak lexical evidence only.

When explicit search finds no exact anchor and its best lexical evidence is weak, the top windows
are taken as probably relevant and their most informative other terms (Bo1 divergence from the
archive: frequent there, rare elsewhere) are added to the query, at most MAX_TERMS. The expanded
query's windows are fused with the original ones; scores stay those of the original query terms.
Never for exact or strong lexical hits, never in preflight.
"""

from __future__ import annotations

import math
from collections import Counter

from cwa.index.terms import terms
from cwa.retrieve.filler import FILLER_TERMS

MAX_TERMS = 8
FEEDBACK_WINDOWS = 3
MIN_DOCUMENT_FREQUENCY = 2  # a term found only in the feedback window itself finds nothing new
CONSIDERED = 12  # the feedback's most frequent terms whose archive frequency is looked up (each
# lookup walks the term's postings, so common words are costly: only terms of 5+ letters qualify)
MIN_LENGTH = 5


def candidate_terms(texts: list[str], qterms: list[str]) -> Counter:
    """Occurrences of the feedback texts' terms that could extend the query (the CONSIDERED most
    frequent: each costs one index lookup)."""
    asked = set(qterms)
    counts = Counter(
        t
        for text in texts
        for t in terms(text)
        if t not in asked and t not in FILLER_TERMS and len(t) >= MIN_LENGTH and not any(c.isdigit() for c in t)
    )
    return Counter(dict(counts.most_common(CONSIDERED)))


def bo1(counts: Counter, df: dict[str, int], total: int) -> list[str]:
    """The MAX_TERMS terms with the highest Bo1 weight, best first."""
    weighted = []
    for term, tf in counts.items():
        frequency = df.get(term, 0)
        if frequency < MIN_DOCUMENT_FREQUENCY or total <= 0:
            continue
        p = frequency / total
        weighted.append((tf * math.log2((1 + p) / p) + math.log2(1 + p), term))
    weighted.sort(key=lambda item: (-item[0], item[1]))
    return [term for _, term in weighted[:MAX_TERMS]]
