"""Everyday words that match but name no concept ("could", "help", "here").

Preflight's gates leave them out of a message's content (cwa/retrieve/continuity.py) and search's
query expansion never adds them (cwa/retrieve/expansion.py). Their own module, so that a search
imports neither preflight's policy nor its regular expressions.
"""

from __future__ import annotations

from cwa.index.terms import terms

# Never shown as a marker's span on their own, nor counted as a message's content.
FILLER_WORDS = frozenset(
    """able about actually again also always another any anything back bad because best better
    both can cannot could did does doing done each even ever every get gets getting give go goes
    going gone good got great had has have having hello help helps here hey hi how just keep kind
    know last let like look looks lot make makes many may maybe might more most much must need
    needs new next nice now ok okay old one ones other please pretty put quite really right same
    say see seems should some something still stuff sure take tell than thank thanks thing things
    think try trying two use used using very want wants way well work works would yeah yes""".split()
)
FILLER_TERMS = frozenset(t for word in FILLER_WORDS for t in terms(word))
