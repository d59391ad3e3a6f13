"""The derived-index handler protocol the store runs at admission and rebuild.

The store owns the canonical rows and runs, inside the admission transaction, whatever handlers
the caller composed (cwa/index/ implements them; cwa/api.py picks them). Each handler runs inside
its own SAVEPOINT: a handler that gives up (or fails) rolls back only its own rows and records
`skipped`, a handler that ran out of its work budget keeps what it wrote and records `partial`,
and the canonical document commits either way. (In a batch the handlers of a document first run
together in one savepoint, and each in its own only if one of them fails or gives up: the same
rows and outcomes, three savepoints fewer a document.)

A handler may also have `prepare(kind, document)`: pure work (tokenizing, extracting anchors)
that admission runs before it takes the write lock, so other writers wait only for the inserts.
Its result reaches `index` as `target.prepared[handler.name]`.

A handler writes its FTS5 rows through `add_full_text`. FTS5 writes the terms it holds as a new
segment of its index at every savepoint and every statement that opens a statement journal, so a
document's handlers (a savepoint each) leave a segment a document in each FTS5 table, which its
automatic merges then rewrite again and again. A batch writer (the index queue, a rebuild) gives
its targets one `FullTextRows`: their rows wait there and go in at the batch's end, one segment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import apsw
import orjson

from cwa.store.anchor_lists import text_ids
from cwa.store.reads import read_bytes
from cwa.store.serialization import SerializedDocument, SerializedMessage
from cwa.store.sqlfiles import queries
from cwa.vocabulary import INDEX_OUTCOMES

# The handlers migration 0022 gave ids (`index_handlers`); any other name gets one on first use.
SEEDED_HANDLER_IDS = {"exact": 1, "lexical": 2, "semantic": 3, "structural": 4}


@dataclass(frozen=True)
class IndexTarget:
    """What a handler may index: one admitted document, canonical rows already inserted."""

    document_row: int
    kind: str
    document: SerializedDocument
    prepared: dict[str, Any] = field(default_factory=dict)  # handler name → its prepare() result
    text_digest: bytes | None = None  # documents.text_digest (32 bytes), when the caller has it already
    rebuild: bool = False  # `cwa index rebuild` replaces every document's rows (new ids may move)
    full_text: FullTextRows | None = None  # a batch's FTS5 rows, written at its end; None: at once


@dataclass(frozen=True)
class HandlerResult:
    outcome: str  # one of INDEX_OUTCOMES: complete | partial | skipped
    detail: str | None = None


class IndexHandler(Protocol):
    name: str

    def index(self, conn: apsw.Connection, target: IndexTarget) -> HandlerResult: ...


class FullTextRows:
    """FTS5 rows held to the end of a batch: (statement, parameters) in the order the handlers
    gave them. Nothing in a batch may read FTS5 rows the batch wrote: the one reader,
    `drop_derived`'s cleanup of the anchor dictionary, is held to the end too (`dropped_texts`)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, Any]] = []
        self.dropped_texts: list[int] = []  # anchor texts a dropped document named

    def write(self, conn: apsw.Connection) -> None:
        """Inside the batch's transaction, after its last handler: every held row, then the
        dropped documents' anchor texts no document names any more deleted; then none held."""
        by_statement: dict[str, list[Any]] = {}
        for statement, params in self.rows:  # each table's rows together, in the order given
            by_statement.setdefault(statement, []).append(params)
        for statement, rows in by_statement.items():
            conn.executemany(statement, rows)
        self.rows.clear()
        if self.dropped_texts:
            unused = {"ids": orjson.dumps(self.dropped_texts).decode()}
            conn.execute(queries("lifecycle")["delete_unused_anchor_texts"], unused)
            self.dropped_texts.clear()


def add_full_text(conn: apsw.Connection, target: IndexTarget, statement: str, params: Any) -> None:
    """A handler's FTS5 row: held in the target's batch, or written now when it has none."""
    if target.full_text is None:
        conn.execute(statement, params)
    else:
        target.full_text.rows.append((statement, params))


class _PrepareFailed:
    def __init__(self, error: Exception) -> None:
        self.error = error


def prepare_handlers(handlers: Sequence[IndexHandler], kind: str, document: SerializedDocument) -> dict[str, Any]:
    """Run each handler's optional pure `prepare` step (no database, no lock)."""
    prepared: dict[str, Any] = {}
    for handler in handlers:
        prepare = getattr(handler, "prepare", None)
        if prepare is None:
            continue
        try:
            prepared[handler.name] = prepare(kind, document)
        except Exception as exc:  # recorded as `skipped` when the handler runs
            prepared[handler.name] = _PrepareFailed(exc)
    return prepared


class Generation:
    """An index generation begun when first used, inside the caller's transaction: one for a
    deferred document, or one for a batch of them (the index queue's), or a rebuild's for all its
    documents. The documents it indexed (`mark`) are marked with it in one statement
    (`write_marks`: a rebuild's at the end of each of its transactions); `finish` marks the rest
    and closes it. None if it was never used."""

    def __init__(self, conn: apsw.Connection, now: str, reason: str = "admit") -> None:
        self.conn, self.now, self.reason, self._id = conn, now, reason, None
        self.documents: list[int] = []

    def id(self) -> int:
        if self._id is None:
            self.conn.execute(queries("admission")["insert_generation"], (self.reason, self.now))
            self._id = self.conn.last_insert_rowid()
        return self._id

    def mark(self, document_row: int) -> None:
        self.documents.append(document_row)

    def write_marks(self) -> None:
        if not self.documents:
            return
        rows = orjson.dumps(self.documents).decode()
        self.conn.execute(queries("index")["set_generations"], {"generation": self.id(), "rows": rows})
        self.documents.clear()

    def finish(self) -> None:
        if self._id is None:
            return
        self.write_marks()
        self.conn.execute(queries("admission")["finish_generation"], (self.now, self._id))


def index_deferred(
    conn: apsw.Connection,
    handlers: Sequence[IndexHandler],
    now: str,
    target: IndexTarget,
    generation: Generation | None = None,
) -> None:
    """The deferred part of a document's admission (a queued document, a checkpoint's part), inside
    the caller's transaction: the handlers' rows and the document marked, in a generation of its
    own or in the batch's `generation` (which marks it when the caller finishes it)."""
    own = generation is None
    if generation is None:
        generation = Generation(conn, now)
    run_handlers(conn, handlers, generation.id(), target)
    generation.mark(target.document_row)
    if own:
        generation.finish()


def run_handlers(
    conn: apsw.Connection,
    handlers: Sequence[IndexHandler],
    generation_id: int,
    target: IndexTarget,
) -> dict[str, str]:
    """Run each handler in its own savepoint and record its outcome; return name → outcome.
    In a batch (`target.full_text`) a document's handlers first run together in one savepoint
    (three releases fewer a document: docs/performance.md, "A batch's FTS5 rows written as one
    segment"); if one of them fails or gives up, that is undone and they run again, each alone."""
    recorded = _run_together(conn, handlers, target) if target.full_text is not None else None
    if recorded is None:
        recorded = [_run_alone(conn, handler, target, f"handler_{n}") for n, handler in enumerate(handlers)]
    if recorded:
        record_outcomes(conn, generation_id, target.document_row, recorded)
    return {name: outcome for name, outcome, _ in recorded}


def _run_together(
    conn: apsw.Connection, handlers: Sequence[IndexHandler], target: IndexTarget
) -> list[tuple[str, str, str | None]] | None:
    """Every handler in one savepoint, each outcome (name, outcome, detail); None, with nothing
    kept, when one fails or gives up."""
    conn.execute("SAVEPOINT handlers")
    held = len(target.full_text.rows)
    recorded: list[tuple[str, str, str | None]] = []
    try:
        for handler in handlers:
            if isinstance(target.prepared.get(handler.name), _PrepareFailed):
                break
            result = handler.index(conn, target)
            if result.outcome not in INDEX_OUTCOMES or result.outcome == "skipped":
                break
            recorded.append((handler.name, result.outcome, result.detail))
        else:
            conn.execute("RELEASE handlers")
            return recorded
    except (apsw.FullError, apsw.IOError):
        raise  # the storage failed, not a handler: the whole batch fails with it
    except Exception:
        pass  # each handler again in its own savepoint, where this one is recorded `skipped`
    _roll_back(conn, "handlers", target, held)
    conn.execute("RELEASE handlers")
    return None


def _run_alone(
    conn: apsw.Connection, handler: IndexHandler, target: IndexTarget, savepoint: str
) -> tuple[str, str, str | None]:
    """One handler in its own savepoint: what it wrote kept unless it gave up or failed."""
    conn.execute(f"SAVEPOINT {savepoint}")
    held = None if target.full_text is None else len(target.full_text.rows)
    try:
        failed = target.prepared.get(handler.name)
        if isinstance(failed, _PrepareFailed):
            raise failed.error
        result = handler.index(conn, target)
        if result.outcome not in INDEX_OUTCOMES:
            raise ValueError(f"handler {handler.name} returned outcome {result.outcome!r}")
        if result.outcome == "skipped":
            _roll_back(conn, savepoint, target, held)  # a skipped handler publishes nothing
    except (apsw.FullError, apsw.IOError):
        raise  # the storage failed, not the handler: the whole admission fails with it
    except Exception as exc:  # a failing handler must never cost the canonical document
        _roll_back(conn, savepoint, target, held)
        result = HandlerResult("skipped", f"error: {type(exc).__name__}: {exc}"[:1000])
    conn.execute(f"RELEASE {savepoint}")
    return handler.name, result.outcome, result.detail


def _roll_back(conn: apsw.Connection, savepoint: str, target: IndexTarget, held: int | None) -> None:
    """Undo a handler's rows: those written, and those its batch holds."""
    conn.execute(f"ROLLBACK TO {savepoint}")
    if held is not None:
        del target.full_text.rows[held:]


def record_outcomes(
    conn: apsw.Connection, generation_id: int, document_row: int, recorded: list[tuple[str, str, str | None]]
) -> None:
    """One document's (handler, outcome, detail) in one generation. The generation keeps which
    handlers ran (bits); only an outcome other than a plain `complete` is a row (migration 0027),
    so a document indexed cleanly writes none. Handlers and outcomes are small ids (0022)."""
    sql = queries("admission")
    bits = [1 << SEEDED_HANDLER_IDS[name] for name, _, _ in recorded if name in SEEDED_HANDLER_IDS]
    if len(bits) == len(recorded):  # the usual handlers: their ids are the schema's, no lookup
        conn.execute(sql["add_generation_handlers"], (sum(set(bits)), generation_id))
    else:
        names = {"outcomes": orjson.dumps(recorded).decode()}
        conn.execute(sql["name_handlers"], names)
        conn.execute(sql["mark_generation_handlers"], {**names, "generation": generation_id})
    exceptions = [r for r in recorded if r[1] != "complete" or r[2] is not None]
    if exceptions:
        rows = {"outcomes": orjson.dumps(exceptions).decode(), "row": document_row, "generation": generation_id}
        conn.execute(sql["record_outcomes"], rows)


def load_target(conn: apsw.Connection, document_row: int, kind: str, byte_length: int) -> IndexTarget:
    """Rebuild a handler's input from canonical rows."""
    text, _ = read_bytes(conn, document_row, 0, byte_length)
    messages = tuple(
        SerializedMessage(key, role, tool_name, tool_call_id, timestamp, start, text_start, end)
        for key, role, tool_name, tool_call_id, timestamp, start, text_start, end in conn.execute(
            queries("index")["document_messages"], (document_row,)
        )
    )
    return IndexTarget(document_row, kind, SerializedDocument(text, messages))


def drop_derived(conn: apsw.Connection, document_row: int, full_text: FullTextRows | None = None) -> list[str]:
    """Delete one document's derived rows (windows and their BM25F rows, anchors, cues, index
    outcomes), inside the caller's transaction; return the content hashes of its windows. In a
    batch that holds FTS5 rows (`full_text`), the anchor texts it leaves unnamed go at its end."""
    sql = queries("lifecycle")
    windows = conn.execute(sql["windows_of"], (document_row,)).fetchall()
    for window_id, _ in windows:
        conn.execute(sql["delete_window_fts_row"], (window_id,))
    conn.execute(sql["delete_windows_of"], (document_row,))
    conn.execute(sql["subtract_windows"], (len(windows),))
    texts = [
        text_id for (packed,) in conn.execute(sql["delete_anchors_of"], (document_row,)) for text_id in text_ids(packed)
    ]
    conn.execute(sql["delete_anchor_postings_of"], (document_row,))  # whether or not it had rows
    if full_text is not None:
        full_text.dropped_texts += texts  # a held posting may name one of them
    elif texts:
        conn.execute(sql["delete_unused_anchor_texts"], {"ids": orjson.dumps(texts).decode()})
    conn.execute(sql["delete_cues_of"], (document_row,))
    conn.execute(sql["delete_outcomes_of"], (document_row,))
    return sorted({content_hash for _, content_hash in windows})
