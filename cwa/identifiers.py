"""How a code identifier splits into words: camelCase, PascalCase, snake_case, SCREAMING_CASE.

The lexical index (cwa/index/terms.py) indexes an identifier whole and as these parts; the token
estimator (cwa/tokens.py) charges for them, so the two always agree on what a part is.
"""

from __future__ import annotations

import re

_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z0-9]+|[^\W_]+")
# Where an identifier changes case: fooBar, foo2Bar, HTTPServer.
_HUMP = re.compile(r"[a-z][A-Z]|[a-z][0-9]+[A-Z]|[A-Z][A-Z][a-z]")


def identifier_split(word: str) -> list[str] | None:
    """The parts of `word` (leading/trailing `_` ignored), or None when it is not an identifier
    (no `_` inside and no change of case): a plain word is not split."""
    core = word.strip("_")
    if "_" not in core and not _HUMP.search(core):
        return None
    return [part for chunk in core.split("_") for part in _PART.findall(chunk)]


def identifier_parts(word: str) -> int:
    """How many parts an identifier is indexed as besides itself (0: not split)."""
    parts = identifier_split(word)
    return len(parts) if parts is not None else 0
