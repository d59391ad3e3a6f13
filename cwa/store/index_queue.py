"""Durable first, indexed soon after: the index queue.

In `cwa serve`, a document the session engine archives (a tool output externalized, a turn
settled, a checkpoint) commits its exact bytes, coordinates and this queue's row in one
transaction and the request returns: `get` and `recall` read it at once. Its derived rows
(windows, BM25F rows, anchors, cues, the embedding queue) are made later by `index_queued`, in a
transaction of its own per document that also deletes the queue row, so a document is indexed
once, whoever gets there first:

- the index worker process of `cwa serve` (cwa/index/queue_worker.py), woken by each deferred
  admission;
- a search or gather of the document's project, before it reads (so search never misses what a
  session archived: the bound on search is zero, at the cost of that search doing the work);
- maintenance, and the next serve process, if the one that queued it died.

The pure part of the work (tokenizing, anchors) runs before the write lock is taken.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import apsw

from cwa import limits
from cwa.store import checkpoint_parts
from cwa.store.connection import write_transaction
from cwa.store.derived import IndexHandler, IndexTarget, load_target, prepare_handlers, run_handlers
from cwa.store.sqlfiles import queries
from cwa.timestamps import to_datetime


def enqueue(conn: apsw.Connection, document_row: int, project_id: int, now: str) -> None:
    """Inside the admission transaction: the document waits for its derived rows."""
    conn.execute(queries("index_queue")["enqueue"], (document_row, project_id, now))


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
    """Index queued documents, oldest first (of one project, or any), one transaction each,
    until the queue is empty, `limit` documents are done or `seconds` have passed; how many.
    `before_lock` runs between a document's pure work and its write transaction (the worker
    waits there for serve to go quiet)."""
    sql, admission = queries("index_queue"), queries("admission")
    deadline = None if seconds is None else time.monotonic() + seconds
    done = 0
    while limit is None or done < limit:
        if deadline is not None and time.monotonic() >= deadline:
            break
        row = conn.execute(sql["next_queued"], {"project": project, "limit": 1}).fetchone()
        if row is None:
            break
        document_row, kind, byte_length, indexable = row
        target = None
        if indexable:  # the pure work first, outside the write lock
            try:
                loaded = load_target(conn, document_row, kind, byte_length)
            except (apsw.BusyError, apsw.FullError, apsw.IOError):
                raise
            except Exception:  # unreadable bytes: it leaves the queue unindexed, and doctor says so
                loaded = None
            if loaded is not None:
                target = IndexTarget(
                    document_row, kind, loaded.document, prepare_handlers(handlers, kind, loaded.document)
                )
        if before_lock is not None:
            before_lock()
        with write_transaction(conn):
            if conn.execute(sql["still_queued"], (document_row,)).fetchone() is None:
                continue  # another connection indexed it meanwhile
            if target is not None:
                conn.execute(admission["insert_generation"], ("admit", now))  # the deferred part of its admission
                generation = conn.last_insert_rowid()
                run_handlers(conn, handlers, generation, target)
                conn.execute(queries("index")["set_generation"], (generation, document_row))
                conn.execute(admission["finish_generation"], (now, generation))
            conn.execute(sql["dequeue"], (document_row,))
        if kind == "checkpoint-root" and target is not None:  # its parts are findable with it
            checkpoint_parts.index_linked(conn, handlers, now, root_row=document_row, limit=limits.UNBOUNDED)
        done += 1
    return done


def lag(conn: apsw.Connection, now: str, project: str | None = None) -> dict[str, Any]:
    """What waits for its derived rows: documents, and how long the oldest has waited."""
    count, oldest = conn.execute(queries("index_queue")["lag"], {"project": project}).fetchone()
    waited = (to_datetime(now) - to_datetime(oldest)).total_seconds() if oldest else 0.0
    return {"documents": count, "oldestSeconds": round(max(0.0, waited), 3)}


def pending(conn: apsw.Connection, project: str | None = None) -> bool:
    found = conn.execute(queries("index_queue")["next_queued"], {"project": project, "limit": 1})
    return found.fetchone() is not None
