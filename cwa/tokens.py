"""A deterministic, conservative estimate of how many model tokens a text costs.

Every hint and recall budget is a hard bound under this estimator, never bytes/4. It errs high:
- ordinary ASCII words cost about one token per four bytes (at least one per camelCase hump);
- opaque identifiers — long hex, letters mixed with digits, 12+ characters, `_`-joined — cost one
  token per byte, since model tokenizers shred them;
- each ASCII punctuation character costs one token, and one more when JSON must escape it;
- each non-ASCII character costs its UTF-8 bytes (CJK, emoji, accented letters);
- a newline costs one token (two inside JSON); runs of spaces one per four.
It upper-bounds the lexical index's term count for the same text (cwa/index/terms.py).
"""

from __future__ import annotations

import re
from functools import lru_cache

from cwa.identifiers import identifier_parts

_PIECE = re.compile(r"[A-Za-z0-9_]+| +|\n|[\x00-\x7f]|[^\x00-\x7f]")
_HEX = re.compile(r"[0-9a-fA-F]{8,}")
_JSON_ESCAPED = frozenset('"\\\b\f\r\t')


def _word_cost(word: str) -> int:
    has_digit = any(c.isdigit() for c in word)
    has_alpha = any(c.isalpha() for c in word)
    if len(word) >= 12 or "_" in word or (has_digit and has_alpha) or (_HEX.fullmatch(word) and has_digit):
        return len(word)
    return max(-(-len(word) // 4), 1 + identifier_parts(word))


@lru_cache(maxsize=65_536)  # words recur: a snippet prices hundreds of pieces
def _piece_cost(piece: str) -> int:
    first = piece[0]
    if first == " ":
        return 0 if len(piece) == 1 else -(-len(piece) // 4)
    if first == "\n":
        return 2
    if first.isascii() and (first.isalnum() or first == "_"):
        return _word_cost(piece)
    if first.isascii():
        return 2 if (first in _JSON_ESCAPED or ord(first) < 0x20) else 1
    return len(piece.encode("utf-8"))


def estimate_tokens(text: str) -> int:
    return sum(_piece_cost(match.group()) for match in _PIECE.finditer(text))


def pieces_of(text: str) -> list[tuple[int, int, int]]:
    """(start, end, cost) of each of the estimator's pieces: cut once, fit many times."""
    return [(m.start(), m.end(), _piece_cost(m.group())) for m in _PIECE.finditer(text)]


def fit_around(text: str, budget: int, focus: int, pieces: list[tuple[int, int, int]] | None = None) -> tuple[int, int]:
    """The widest [left, right) of `text` around character `focus` whose estimate is within
    `budget`, growing about two pieces after the focus for each one before it. Cuts fall between
    the estimator's pieces, so the estimate of the slice is the sum of its pieces' costs.
    `pieces` may be given when `pieces_of(text)` is already known."""
    pieces = pieces_of(text) if pieces is None else pieces
    if not pieces:
        return 0, 0
    focus = min(max(0, focus), len(text) - 1)
    first = last = next((i for i, (start, end, _) in enumerate(pieces) if end > focus), len(pieces) - 1)
    total = pieces[first][2]
    if total > budget:  # one piece alone is too costly (a long opaque id): cut inside it
        return _fit_by_width(text, budget, focus)
    while True:
        grew = False
        for _ in range(2):
            if last + 1 < len(pieces) and total + pieces[last + 1][2] <= budget:
                last += 1
                total += pieces[last][2]
                grew = True
        if first > 0 and total + pieces[first - 1][2] <= budget:
            first -= 1
            total += pieces[first][2]
            grew = True
        if not grew:
            return pieces[first][0], pieces[last][1]


def _fit_by_width(text: str, budget: int, focus: int) -> tuple[int, int]:
    """Binary search on a character width around `focus` (a third before, two thirds after)."""

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
