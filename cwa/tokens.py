"""A deterministic, conservative estimate of how many model tokens a text costs.

Every hint and recall budget is a hard bound under this estimator, never bytes/4. It errs high:
- ordinary ASCII words cost about one token per four bytes (at least one per camelCase hump);
- opaque identifiers — long hex, letters mixed with digits, 12+ characters, `_`-joined — cost one
  token per byte, since model tokenizers shred them;
- each ASCII punctuation character costs one token, and one more when JSON must escape it;
- each non-ASCII character costs its UTF-8 bytes (CJK, emoji, accented letters);
- a newline costs one token (two inside JSON); runs of spaces one per four.
It upper-bounds the lexical index's term count for the same text (cwa.index.terms).
"""

from __future__ import annotations

import re

from cwa.index.terms import identifier_parts

_PIECE = re.compile(r"[A-Za-z0-9_]+| +|\n|[\x00-\x7f]|[^\x00-\x7f]")
_HEX = re.compile(r"[0-9a-fA-F]{8,}")
_JSON_ESCAPED = frozenset('"\\\b\f\r\t')


def _word_cost(word: str) -> int:
    has_digit = any(c.isdigit() for c in word)
    has_alpha = any(c.isalpha() for c in word)
    if (
        len(word) >= 12
        or "_" in word
        or (has_digit and has_alpha)
        or (_HEX.fullmatch(word) and has_digit)
    ):
        return len(word)
    return max(-(-len(word) // 4), 1 + identifier_parts(word))


def estimate_tokens(text: str) -> int:
    total = 0
    for match in _PIECE.finditer(text):
        piece = match.group()
        first = piece[0]
        if first == " ":
            total += 0 if len(piece) == 1 else -(-len(piece) // 4)
        elif first == "\n":
            total += 2
        elif first.isascii() and (first.isalnum() or first == "_"):
            total += _word_cost(piece)
        elif first.isascii():
            total += 2 if (first in _JSON_ESCAPED or ord(first) < 0x20) else 1
        else:
            total += len(piece.encode("utf-8"))
    return total


def fit_around(text: str, budget: int, focus: int) -> tuple[int, int]:
    """The widest [left, right) of `text` around character `focus` (a third before it, two
    thirds after) whose estimate is within `budget`; binary search on the width."""
    focus = min(max(0, focus), len(text))

    def bounds(width: int) -> tuple[int, int]:
        left = max(0, focus - width // 3)
        return left, min(len(text), left + width)

    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        left, right = bounds(middle)
        if estimate_tokens(text[left:right]) <= budget:
            low = middle
        else:
            high = middle - 1
    return bounds(low)
