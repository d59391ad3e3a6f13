"""Logical windows and the FTS5 BM25F index over them.

A window is a bounded run of terms inside one document: consecutive messages are kept whole
while they fit in WINDOW_TERMS; a longer message is cut into slices of WINDOW_TERMS terms. Each
window's terms go to one FTS5 column per field, and `bm25()` column weights make that BM25F:

    title 3.0  question/request/correction/answer messages and whole decision documents
    user  2.0  other user text
    assistant 1.5
    body  1.0  tool output and every other role
    context 0.3  the last CONTEXT_TERMS terms of the message just before the window

A document with no message-role structure lands entirely in `body`, whose weight 1.0 makes its
score exactly unweighted BM25.

The context field lets a turn be found by the words around it: a reply by the question it
answers. It is the message before the window's first message in the same document, or, for a
document's first window, the last message of the previous conversational document of its session
(creation order, then row). Context terms are indexed only: the window's bytes, its recalled text,
its exact anchors and its matched terms stay its own, and context terms carry a mark
(cwa/index/terms.py) so a term's document frequency counts only the windows holding it as text. When that previous document leaves every
mode, the purge indexes the next one again (cwa/store/purge.py), so no term of a gone document
stays findable through its neighbour.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import apsw
import blake3

from cwa.index.structure import CUE_THRESHOLD, message_views, score_messages
from cwa.index.terms import context_term, term_starts
from cwa.store.derived import HandlerResult, IndexTarget, add_full_text
from cwa.store.reads import read_bytes
from cwa.store.serialization import SerializedDocument
from cwa.store.sqlfiles import queries
from cwa.vocabulary import CUES

WINDOW_TERMS = 200
MAX_TERMS_PER_DOCUMENT = 1_200_000  # the lexical work budget of one document
COLUMNS = ("title", "user", "assistant", "body", "context")
WEIGHTS = {"title": 3.0, "user": 2.0, "assistant": 1.5, "body": 1.0, "context": 0.3}
CONTEXT_TERMS = 32
CONTEXT_TAIL_BYTES = 4096  # what is first read of the previous message for its last terms
CONTEXT_KINDS = ("turn", "tool-result", "preamble")  # conversational documents chain their context
# Each project's windows take ids from its own block ((project row - 1) << PROJECT_BLOCK_BITS, then
# up), so a project's id range never holds another project's windows, however their sessions
# interleave in time: FTS5 bounded to the range (cwa/retrieve/context.window_span) walks only the
# project's postings. The first project's block is block 0, so an archive of one project keeps
# small ids (they cost bytes in every index that holds them). 2**32 windows a project; ids stay
# below 2**53 (exact in JSON and JavaScript) for the first 2**21 projects.
PROJECT_BLOCK_BITS = 32


@dataclass
class Window:
    start: int
    end: int
    first_message: int
    last_message: int
    columns: dict[str, list[str]] = field(default_factory=lambda: {c: [] for c in COLUMNS})

    @property
    def term_count(self) -> int:
        """The window's own terms (its context is not its text)."""
        return sum(len(v) for c, v in self.columns.items() if c != "context")


def _column(role: str, cues: dict[str, float], kind: str) -> str:
    if kind == "decision" or any(cues.get(c, 0) >= CUE_THRESHOLD for c in CUES):
        return "title"
    return {"user": "user", "assistant": "assistant"}.get(role, "body")


class Plan(NamedTuple):
    windows: list[Window]
    cut: bool  # the term budget cut the document short
    closing: list[str] | None  # its last message's context terms (None when cut before it)


def plan_windows(kind: str, document: SerializedDocument, budget: int = MAX_TERMS_PER_DOCUMENT) -> Plan:
    """The document's windows, whether the term budget cut it short, and the context its last
    message gives the next document of its session."""
    views = message_views(document)
    cue_scores = score_messages(kind, views)
    windows: list[Window] = []
    current: Window | None = None
    spent = 0
    before: list[str] = []  # the previous message's last terms: a new window's context
    for ordinal, (message, view, cues) in enumerate(zip(document.messages, views, cue_scores)):
        column = _column(message.role, cues, kind)
        found = term_starts(view.text)
        context, before = before, context_terms(term for term, _ in found)
        if spent + len(found) > budget:
            found = found[: max(0, budget - spent)]
            truncated = True
        else:
            truncated = False
        spent += len(found)
        if len(found) <= WINDOW_TERMS and not truncated:
            if current is None or current.term_count + len(found) > WINDOW_TERMS:
                current = Window(message.start, message.end, ordinal, ordinal)
                current.columns["context"].extend(context)
                windows.append(current)
            current.end, current.last_message = message.end, ordinal
            current.columns[column].extend(term for term, _ in found)
            continue
        # A long message: slices of WINDOW_TERMS terms, cut where a slice's first token starts.
        current = None
        byte_at, char_at = message.text_start, 0
        for first in range(0, len(found), WINDOW_TERMS):
            piece = found[first : first + WINDOW_TERMS]
            slice_start = message.start if first == 0 else byte_at
            if first + WINDOW_TERMS < len(found):
                next_char = found[first + WINDOW_TERMS][1]
                byte_at += len(view.text[char_at:next_char].encode("utf-8"))
                char_at = next_char
                slice_end = byte_at
            else:
                slice_end = message.end
            window = Window(slice_start, slice_end, ordinal, ordinal)
            if first == 0:
                window.columns["context"].extend(context)
            window.columns[column].extend(term for term, _ in piece)
            windows.append(window)
        if truncated:
            return Plan(windows, True, None)
    return Plan(windows, False, before)


def context_terms(found: Iterable[str]) -> list[str]:
    """The distinct terms among the last CONTEXT_TERMS of a message (where a question usually
    ends), marked as context."""
    return [context_term(t) for t in dict.fromkeys(deque(found, maxlen=CONTEXT_TERMS))]


def previous_context(conn: apsw.Connection, kind: str, document_row: int, known: ClosingContexts) -> list[str]:
    """The context of a document's first window: the last terms of the previous conversational
    document's last message in its session (none for other kinds)."""
    if kind not in CONTEXT_KINDS:
        return []
    found = conn.execute(queries("index")["previous_in_session"], {"row": document_row}).fetchone()
    if found is None or found[1] not in CONTEXT_KINDS:
        return []
    row, _, digest, start, end = found
    cached = known.get(row, digest, start, end)
    if cached is not None:
        return cached
    return context_terms(_last_terms(conn, row, start, end, CONTEXT_TERMS))


class ClosingContexts:
    """The context each recently indexed document's last message gives the next one of its
    session, so that indexing a session's next document does not read and tokenize it again.
    Keyed by the document's row and text digest: a row an aborted transaction gave back and a
    later document took never matches."""

    SIZE = 512

    def __init__(self) -> None:
        self._found: dict[tuple[int, bytes, int, int], list[str]] = {}

    def get(self, row: int, digest: bytes, start: int, end: int) -> list[str] | None:
        return self._found.get((row, digest, start, end))

    def put(self, target: IndexTarget, terms: list[str]) -> None:
        last = target.document.messages[-1]
        digest = target.text_digest or blake3.blake3(target.document.text).digest()  # admission has it
        if len(self._found) >= self.SIZE:
            del self._found[next(iter(self._found))]  # the oldest
        self._found[(target.document_row, digest, last.text_start, last.end)] = terms


def _last_terms(conn: apsw.Connection, row: int, start: int, end: int, wanted: int) -> list[str]:
    """The last `wanted` (or more) terms of bytes [start, end) of a document, reading only as much
    of its tail as they need (the message before may be a 200 KB log): the same terms as the
    whole message ends with, since a tail's first token, which may be cut, never counts."""
    size = CONTEXT_TAIL_BYTES
    while True:
        cut = max(start, end - size)
        data, _ = read_bytes(conn, row, cut, end)
        found = term_starts(data.decode("utf-8", errors="ignore"))
        if cut == start:
            return [term for term, _ in found]
        whole = [term for term, at in found if at > 0]
        if len(whole) >= wanted:
            return whole
        size *= 4


class LexicalHandler:
    name = "lexical"

    def __init__(self) -> None:
        self.closing = ClosingContexts()

    def prepare(self, kind: str, document: SerializedDocument) -> Plan:
        return plan_windows(kind, document)

    def index(self, conn: apsw.Connection, target: IndexTarget) -> HandlerResult:
        sql = queries("index")
        prepared = target.prepared.get(self.name)
        windows, cut, closing = prepared if prepared is not None else plan_windows(target.kind, target.document)
        data = target.document.text
        if windows and not windows[0].columns["context"]:
            windows[0].columns["context"] = previous_context(conn, target.kind, target.document_row, self.closing)
        first = None
        next_id = self.first_window_id(conn, target.document_row, target.rebuild) if windows else None
        for ordinal, window in enumerate(windows):
            conn.execute(
                sql["insert_window"],
                (
                    None if next_id is None else next_id + ordinal,
                    target.document_row,
                    ordinal,
                    window.start,
                    window.end,
                    window.first_message,
                    window.last_message,
                    window.term_count,
                    blake3.blake3(data[window.start : window.end]).digest(),
                ),
            )
            last = conn.last_insert_rowid()
            first = last if first is None else first
            add_full_text(
                conn, target, sql["insert_window_fts"], (last, *(" ".join(window.columns[c]) for c in COLUMNS))
            )
        conn.execute(sql["add_windows"], (len(windows),))  # rolled back with the savepoint if skipped
        if first is not None:
            self.widen_span(conn, target.document_row, first, last)
        if closing is not None and target.kind in CONTEXT_KINDS and target.document.messages:
            self.closing.put(target, closing)
        if cut:
            return HandlerResult("partial", f"term budget of {MAX_TERMS_PER_DOCUMENT} reached")
        return HandlerResult("complete")

    def first_window_id(self, conn: apsw.Connection, document_row: int, rebuild: bool = False) -> int | None:
        """The id of the document's first new window: the next in its project's block. A project
        with windows indexed before blocks (ids one after another, every project's in block 0)
        keeps adding there, so its range stays as narrow as it was, until a rebuild moves it."""
        params = {"row": document_row, "bits": PROJECT_BLOCK_BITS, "fresh": rebuild}
        return conn.execute(queries("index")["next_window_id"], params).fetchone()[0]

    def widen_span(self, conn: apsw.Connection, document_row: int, first: int, last: int) -> None:
        """Widen the document's project's window range to its new windows' ids: search bounds a
        project's FTS5 work by that range (context.window_span), so no window may lie outside it."""
        conn.execute(queries("index")["extend_project_span"], {"row": document_row, "low": first, "high": last})
