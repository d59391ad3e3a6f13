"""Durable first, indexed soon after: the index queue.

In `cwa serve`, a document the session engine archives (a tool output externalized, a turn
settled, a checkpoint) commits its exact bytes, coordinates and this queue's row in one
transaction and the request returns: `get` and `recall` read it at once. Its derived rows
(windows, BM25F rows, anchors, cues, the embedding queue) are made later by `index_queued`, in a
transaction (a few small documents to one) that also deletes their queue rows, so a document is
indexed once, whoever gets there first:

- the index worker process of `cwa serve` (cwa/index/queue_worker.py), woken by each deferred
  admission;
- a search or gather of the document's project, before it reads (so search never misses what a
  session archived: the bound on search is zero, at the cost of that search doing the work);
- maintenance, and the next serve process, if the one that queued it died.

The pure part of the work (tokenizing, anchors, deflating the chunks admission stored as their
bytes: cwa/store/payloads.py) runs before the write lock is taken.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import apsw

from cwa import limits
from cwa.store import checkpoint_parts
from cwa.store.connection import write_transaction
from cwa.store.derived import (
    FullTextRows,
    Generation,
    IndexHandler,
    IndexTarget,
    index_deferred,
    load_target,
    prepare_handlers,
)
from cwa.store.payloads import deflated_rows
from cwa.store.sqlfiles import queries
from cwa.timestamps import to_datetime


def enqueue(conn: apsw.Connection, document_row: int, project_id: int, now: str) -> None:
    """Inside the admission transaction: the document waits for its derived rows."""
    conn.execute(queries("index_queue")["enqueue"], (document_row, project_id, now))


BATCH_DOCUMENTS = 8  # documents indexed in one write transaction, when that many wait
BATCH_BYTES = 16 * 1024  # while their texts add up to no more than this (a larger document goes alone)


Queued = tuple[int, str, int, bool]  # a next_queued row: document row, kind, byte length, indexable
Prepared = tuple[int, str, "IndexTarget | None", list[dict[str, Any]]]  # prepare_queued's: row, kind, target, chunks


def index_queued(
    conn: apsw.Connection,
    handlers: Sequence[IndexHandler],
    now: str,
    *,
    project: str | None = None,
    limit: int | None = None,
    seconds: float | None = None,
    before_lock: Callable[[], None] | None = None,
) -> int:
    """Index queued documents, oldest first (of one project, or any), until the queue is empty,
    `limit` documents are done or `seconds` have passed; how many. Small documents go up to
    BATCH_DOCUMENTS to a transaction (one commit for the lot: a commit writes a page of every
    tree a document touches, however small the document), a larger one alone, so a batch holds
    the write lock about as long as one document of BATCH_BYTES.
    `before_lock` runs between a batch's pure work and its write transaction (the worker waits
    there for serve to go quiet)."""
    deadline = None if seconds is None else time.monotonic() + seconds
    done = 0
    while limit is None or done < limit:
        if deadline is not None and time.monotonic() >= deadline:
            break
        wanted = BATCH_DOCUMENTS if limit is None else min(BATCH_DOCUMENTS, limit - done)
        queued = queued_documents(conn, wanted, project)
        if not queued:
            break
        batch, size = [], 0
        for row in queued:
            if batch and size + row[2] > BATCH_BYTES:
                break
            batch.append(prepare_queued(conn, handlers, row))
            size += row[2]
        if before_lock is not None:
            before_lock()
        done += index_prepared(conn, handlers, now, batch)
    return done


def by_row(read: Callable[[int], list[tuple]]) -> Iterator[tuple]:
    """Every row `read(after)` gives, a page at a time: each page read past the previous page's
    last row (its first column), until one is empty (a queue or a rebuild of a million documents
    holds one page of tuples, not a million)."""
    after = 0
    while page := read(after):
        after = page[-1][0]
        yield from page


def queued_documents(conn: apsw.Connection, limit: int, project: str | None = None, after: int = 0) -> list[Queued]:
    """The oldest `limit` queued documents past row `after` (of one project, or any)."""
    params = {"project": project, "limit": limit, "after": after}
    return conn.execute(queries("index_queue")["next_queued"], params).fetchall()


def prepare_queued(
    conn: apsw.Connection, handlers: Sequence[IndexHandler], queued: Queued, deflate: bool = True
) -> Prepared:
    """A queued document's pure work, before the write lock (any connection to the archive may do
    it, a read-only one in another process too): its handlers' input and prepared rows (None when
    it gets no derived rows) and, with `deflate`, the chunks admission stored as their bytes
    deflated (a rebuild leaves chunks as they are: cwa/store/chunk_packing.py converts old ones)."""
    document_row, kind, byte_length, indexable = queued
    target = _prepared(conn, handlers, document_row, kind, byte_length, indexable)
    return document_row, kind, target, _deflated_chunks(conn, document_row) if deflate else []


def index_prepared(conn: apsw.Connection, handlers: Sequence[IndexHandler], now: str, batch: list[Prepared]) -> int:
    """Write a batch of prepared documents in one transaction, each leaving the queue (one another
    connection indexed meanwhile is skipped: nothing is indexed twice); how many it indexed.
    The batch's FTS5 rows are written together at its end, one segment (cwa/store/derived.py); if
    a damaged FTS5 index refuses them, the batch is written again with each document's rows in
    its handlers' savepoints, so the handler that meets the damage is recorded `skipped`, as one
    document alone would be, and the rest is indexed."""
    try:
        indexed = _write_batch(conn, handlers, now, batch, FullTextRows())
    except (apsw.BusyError, apsw.FullError, apsw.IOError):
        raise
    except apsw.Error:
        indexed = _write_batch(conn, handlers, now, batch, None)
    for document_row, kind, target, _ in batch:
        if kind == "checkpoint-root" and target is not None and document_row in indexed:  # parts findable with it
            checkpoint_parts.index_linked(conn, handlers, now, root_row=document_row, limit=limits.UNBOUNDED)
    return len(indexed)


def _write_batch(
    conn: apsw.Connection,
    handlers: Sequence[IndexHandler],
    now: str,
    batch: list[Prepared],
    full_text: FullTextRows | None,
) -> set[int]:
    """One transaction: each document's derived rows, in one index generation for the batch, its
    FTS5 rows held in `full_text` (if any) and written at the end; the rows of the documents it
    indexed."""
    with write_transaction(conn):
        generation = Generation(conn, now)  # its three statements once a batch, not once a document
        indexed = {
            row
            for row, _, target, deflated in batch
            if _index_one(conn, handlers, now, row, target, deflated, full_text, generation)
        }
        generation.finish()
        if full_text is not None:
            full_text.write(conn)
    return indexed


def _prepared(
    conn: apsw.Connection,
    handlers: Sequence[IndexHandler],
    document_row: int,
    kind: str,
    byte_length: int,
    indexable: bool,
) -> IndexTarget | None:
    """A queued document's pure work, outside the write lock; None when it gets no rows."""
    if not indexable:
        return None
    try:
        loaded = load_target(conn, document_row, kind, byte_length)
    except (apsw.BusyError, apsw.FullError, apsw.IOError):
        raise
    except Exception:  # unreadable bytes: it leaves the queue unindexed, and doctor says so
        return None
    if loaded is None:
        return None
    return IndexTarget(document_row, kind, loaded.document, prepare_handlers(handlers, kind, loaded.document))


def _deflated_chunks(conn: apsw.Connection, document_row: int) -> list[dict[str, Any]]:
    """The document's chunks stored as their bytes, deflated where that is shorter (pure work)."""
    return deflated_rows(conn.execute(queries("payloads")["whole_chunks_of"], (document_row,)))


def _index_one(
    conn: apsw.Connection,
    handlers: Sequence[IndexHandler],
    now: str,
    document_row: int,
    target: IndexTarget | None,
    deflated: list[dict[str, Any]],
    full_text: FullTextRows | None,
    generation: Generation,
) -> bool:
    """Inside the batch's transaction: the document's derived rows (in the batch's `generation`,
    its FTS5 rows held in the batch's `full_text`) and deflated chunks, and it leaves the queue;
    False when another connection indexed it meanwhile."""
    if conn.execute(queries("index_queue")["still_queued"], (document_row,)).fetchone() is None:
        return False
    if target is not None:
        index_deferred(conn, handlers, now, dataclasses.replace(target, full_text=full_text), generation)
    leave_queue(conn, document_row, deflated)
    return True


def leave_queue(conn: apsw.Connection, document_row: int, deflated: list[dict[str, Any]]) -> None:
    """Inside the write transaction that gave the document its derived rows (the queue's, or a
    rebuild's): the chunks `prepare_queued` deflated stored, and its queue row, if it had one, gone."""
    if deflated:
        conn.executemany(queries("payloads")["store_deflated"], deflated)
    conn.execute(queries("index_queue")["dequeue"], (document_row,))


def lag(conn: apsw.Connection, now: str, project: str | None = None) -> dict[str, Any]:
    """What waits for its derived rows: documents, and how long the oldest has waited."""
    count, oldest = conn.execute(queries("index_queue")["lag"], {"project": project}).fetchone()
    waited = (to_datetime(now) - to_datetime(oldest)).total_seconds() if oldest else 0.0
    return {"documents": count, "oldestSeconds": round(max(0.0, waited), 3)}


def pending(conn: apsw.Connection, project: str | None = None) -> bool:
    return bool(queued_documents(conn, 1, project))
