"""A reply that restates the user's words ranks right below them.

Chat assistants confirm what they are told by saying it back ("Got it: you prefer type hints on
every public function"). The user's message is the source and the reply a copy of its words,
which the ranker may well place first: it holds the same terms, often beside more on the same
subject. So, in a learned tier, the user's message moves up to just above a reply of that kind
ranked before it, from lower in the tier or from the ranker's pool (a neighbour left out below
NEIGHBOR_MIN_PROBABILITY); preflight counts the reply as the message's copy, not its rival
(`restatements`). A reply restates the message when it opens its document with the assistant's
message right after the user's in the same session, matches no query term the message does not,
the message does not end asking a question (the reply is then its answer, not a copy), and
either the query asks what the user said they like or require (`intent.asks_own_words`: the
answer is the user's words, whatever the reply adds) or the reply opens by saying the message
back (`opens_saying_back`: a reply that opens otherwise, "Done that way. …", may hold what a
question asks beside the message's words, the path it changed or what it did).
"""

from __future__ import annotations

import re
from dataclasses import replace

import apsw
import orjson

from cwa.index.terms import terms
from cwa.retrieve.candidate import Candidate
from cwa.retrieve.filler import FILLER_TERMS
from cwa.retrieve.intent import asks_own_words
from cwa.retrieve.ranker import Pool, ends_asking
from cwa.store.sqlfiles import queries

OPENING_MIN_WORDS = 3  # "Got it." says nothing back
OPENING_SHARE = 0.7  # of the opening's words, the message's
OPENING_MAX_CHARS = 300  # an opening without a sentence's end
_HEADER = re.compile(r"\A\[[^\]\n]*\]\n")  # the message's header line, in a window's text
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")


def reorder(conn: apsw.Connection, tier: list[Candidate], pool: Pool, query: str) -> list[Candidate]:
    """The tier with each user's message just above the replies ranked before it that restate it;
    `pool`, the ranker's (a message left out of the tier is found among its candidates)."""
    sources = _sources(conn, tier, pool.candidates, query, pool.before)
    ordered = list(tier)
    for reply in [c for c in tier if c.document_row in sources]:
        source = sources[reply.document_row]
        at = next(i for i, c in enumerate(ordered) if c.document_row == reply.document_row)
        held = next((i for i, c in enumerate(ordered) if c.document_row == source.document_row), None)
        if held is not None and held < at:
            continue
        if held is not None:
            source = ordered.pop(held)
        ordered.insert(at, replace(source, order=max(source.order, reply.order)))
    return ordered


def restatements(
    conn: apsw.Connection, candidates: list[Candidate], query: str, before: dict[int, int | None]
) -> set[int]:
    """The document rows of those candidates that restate a user's message also among them;
    `before`, the documents just before them that the ranker read (`Pool.before`)."""
    return set(_sources(conn, candidates, candidates, query, before))


def _sources(
    conn: apsw.Connection, replies: list[Candidate], among: list[Candidate], query: str, read: dict[int, int | None]
) -> dict[int, Candidate]:
    """For each of `replies` that restates a user's message found in `among`, that message's
    candidate, by the reply's document row."""
    if not replies:
        return {}
    own = asks_own_words(query)
    before = _replies_to_user(conn, [c.document_row for c in replies], read)
    known = {c.document_row: c for c in among}
    found = {}
    for reply in replies:
        source = known.get(before.get(reply.document_row))
        if source is None or not set(reply.matched) <= set(source.matched) or ends_asking(source.text):
            continue
        if own or opens_saying_back(reply.text, source.text):
            found[reply.document_row] = source
    return found


def _replies_to_user(conn: apsw.Connection, rows: list[int], read: dict[int, int | None]) -> dict[int, int]:
    """Of the given documents, each one opening with the assistant's message right after a user's
    message in its session: its row → the row of the document holding that message last. The
    document before each is the ranker's reading (`read`), asked here only for those it did not
    read (the neighbours it added)."""
    sql = queries("ranking")
    unread = [row for row in rows if row not in read]
    if unread:
        found = conn.execute(sql["session_neighbors"], {"rows": orjson.dumps(unread).decode()})
        read = {**read, **{row: previous for row, previous, *_ in found}}
    before = {row: read[row] for row in rows if read.get(row) is not None}
    if not before:
        return {}
    asked = orjson.dumps([*before, *before.values()]).decode()
    roles = {row: (first, last) for row, first, last in conn.execute(sql["message_roles"], {"rows": asked})}
    return {
        row: previous
        for row, previous in before.items()
        if roles[row][0] == "assistant" and roles[previous][1] == "user"
    }


def opens_saying_back(reply: str, said: str) -> bool:
    """Whether a reply opens by saying back what was said: at least three words of its first
    sentence (its message's header line aside), and most of them, are the message's."""
    text = _HEADER.sub("", reply.lstrip(), count=1)
    end = _SENTENCE_END.search(text)
    opening = {t for t in terms(text[: end.end() if end else OPENING_MAX_CHARS]) if t not in FILLER_TERMS}
    held = set(terms(said))
    return len(opening) >= OPENING_MIN_WORDS and len(opening & held) >= OPENING_SHARE * len(opening)
