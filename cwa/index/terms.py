"""Terms for the lexical index, from prose and code alike.

Every word is NFKC-normalized and case-folded; plain ASCII words are Porter-stemmed; a short
stop list is dropped. An identifier (camelCase, PascalCase, snake_case, SCREAMING_CASE) is
indexed whole and as its parts, so `RetryPolicy` is found by `retry` and by `RetryPolicy`.
Dotted names (`os.path.join`) are separate words already. CJK text, which has no spaces, is
indexed a character at a time. Index and query go through the same function, so they agree.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from cwa.identifiers import identifier_split
from cwa.index.porter import stem

MAX_QUERY_TERMS = 20
MAX_TERM_CHARS = 64
# Marks a term indexed as a window's context (cwa/index/lexical.py). `\w` never matches it, so a
# marked term is never a term of text: its document frequency is the context's own, and the
# window's own terms keep theirs.
CONTEXT_MARK = "\u00b7"

STOP_WORDS = frozenset(
    """a an and are as at be been but by do does did for from had has have he her his i if in
    into is it its me my no not of on or our she so such than that the their them then there
    these they this those to too us was we were what when where which while who whom why will
    with would you your""".split()
)

_RAW_TOKEN = re.compile(r"\w+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


@dataclass(frozen=True)
class Token:
    term: str
    start: int  # character offsets into the text
    end: int


def _word(word: str) -> str | None:
    folded = word.casefold()
    if not folded or folded in STOP_WORDS:
        return None
    if folded.isascii() and folded.isalpha():
        folded = stem(folded)
    return folded[:MAX_TERM_CHARS]


def _expand(raw: str) -> tuple[str, ...]:
    """The terms of one raw `\\w+` token."""
    if raw.isdigit() and raw.isascii():  # numbers vary endlessly in logs: skip the cache
        return (raw[:MAX_TERM_CHARS],)
    return _expand_cached(raw)


@lru_cache(maxsize=262_144)
def _expand_cached(raw: str) -> tuple[str, ...]:
    return tuple(_expand_uncached(raw))


def _expand_uncached(raw: str) -> list[str]:
    text = unicodedata.normalize("NFKC", raw)
    if _CJK.search(text):
        terms = []
        for piece in re.split(f"({_CJK.pattern})", text):
            if not piece:
                continue
            if _CJK.fullmatch(piece):
                terms.append(piece)
            else:
                terms.extend(_expand_uncached(piece))
        return terms
    parts = identifier_split(text)
    if parts is None or len(parts) <= 1:
        term = _word(text.strip("_"))
        return [term] if term else []
    whole = text.casefold()[:MAX_TERM_CHARS]  # identifiers are kept whole, unstemmed
    return [whole] + [t for t in (_word(p) for p in parts) if t]


def term_starts(text: str) -> list[tuple[str, int]]:
    """(term, character offset of its raw token) for every term: the indexing hot path."""
    return [(term, match.start()) for match in _RAW_TOKEN.finditer(text) for term in _expand(match.group())]


def first_start(text: str, wanted: set[str]) -> int:
    """Character offset of the first raw token with a term in `wanted` (0 when none)."""
    for match in _RAW_TOKEN.finditer(text):
        if not wanted.isdisjoint(_expand(match.group())):
            return match.start()
    return 0


def tokens(text: str) -> Iterator[Token]:
    for match in _RAW_TOKEN.finditer(text):
        for term in _expand(match.group()):
            yield Token(term, match.start(), match.end())


def terms(text: str) -> list[str]:
    return [term for raw in _RAW_TOKEN.findall(text) for term in _expand(raw)]


def query_terms(text: str) -> list[str]:
    """Distinct terms of a query, in order of first appearance."""
    seen: dict[str, None] = {}
    for term in terms(text):
        seen.setdefault(term, None)
    return list(seen)


def fts_phrase(term: str) -> str:
    """A term as an FTS5 string literal."""
    return '"' + term.replace('"', '""') + '"'


def context_term(term: str) -> str:
    return CONTEXT_MARK + term


def fts_term_or_context(term: str) -> str:
    """An FTS5 expression matching a term in a window's own fields or in its context field."""
    return f"({fts_phrase(term)} OR {fts_phrase(context_term(term))})"
