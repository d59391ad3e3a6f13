"""`cwa index rebuild`: recompute every derived row from the canonical rows.

The rebuild works through the documents in short transactions (about BATCH_SECONDS of work each,
with a pause between them), so a read's small writes (a lease, a preflight decision) and other
writers wait at most one batch, never the whole rebuild. Each document's derived rows are
replaced in one transaction: a reader sees a document's old rows or its new ones, never a mix;
handlers are deterministic, so the same canonical rows give the same search results (a helper
process may do each document's pure work: cwa/index/queue_worker.py). Derived rows
of documents that no longer qualify (expired, redacted, orphan checkpoint parts) are dropped at
the end, in batches too. Last, every common term's window count is kept again (it was forgotten:
a new tokenizer may count otherwise), so the first searches after a rebuild count none.

While it runs, FTS5's merges of deleted rows are held, and caught up once at its end
(cwa/store/full_text_merges.py): each document's old rows are deleted, and merging the levels
they leave tombstoned again and again was a third of a 1M rebuild's time (docs/performance.md).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence

import apsw

from cwa.index.queue_worker import prepared_documents
from cwa.store import full_text_merges, term_counts
from cwa.store.connection import write_transaction
from cwa.store.derived import FullTextRows, Generation, IndexHandler, drop_derived, load_target, run_handlers
from cwa.store.index_queue import by_row, leave_queue
from cwa.store.sqlfiles import queries

BATCH_SECONDS = 0.2  # the longest a rebuild holds the write lock at a time
FIRST_BATCH = 8  # documents taken for the first transaction; later ones as many as fit BATCH_SECONDS
MAX_BATCH = 256  # at most half of what a helper prepares ahead (queue_worker.HELPER_AHEAD exchanges)
PAGE = 4096  # documents read at a time
YIELD_SECONDS = 0.03  # a gap for writers polling SQLite's lock (it is not a fair queue)


def _batches(
    conn: apsw.Connection,
    items: Iterable,
    total: int,
    work: Callable[[object], None],
    progress: Callable[[int, int], None] | None = None,
    ending: Callable[[], None] | None = None,
) -> None:
    """Run `work` on each of the `total` items inside write transactions of about BATCH_SECONDS
    each. Items are taken from `items` before each transaction (a helper preparing them may keep
    this process waiting: never with the lock held), as many as the last one got through in
    BATCH_SECONDS; what a transaction does not reach goes first in the next. `ending` runs at the
    end of each transaction (writing what `work` held for it)."""
    items = iter(items)
    waiting: deque = deque()
    wanted, done = FIRST_BATCH, 0
    while True:
        waiting.extend(itertools.islice(items, max(0, wanted - len(waiting))))
        if not waiting:
            return
        if done:
            time.sleep(YIELD_SECONDS)  # between transactions, not after the last
        with write_transaction(conn):
            started = time.monotonic()
            count = 0
            while waiting:
                work(waiting.popleft())
                count += 1
                if time.monotonic() - started >= BATCH_SECONDS:
                    break
            if ending is not None:
                ending()
            spent = time.monotonic() - started
        done += count
        wanted = max(1, min(MAX_BATCH, round(count * BATCH_SECONDS / max(spent, 1e-3))))
        if progress:
            progress(done, max(total, done))


def rebuild_indexes(
    conn: apsw.Connection,
    handlers: Sequence[IndexHandler],
    now: str,
    progress: Callable[[int, int], None] | None = None,
    path: str | None = None,
) -> dict:
    """Every derived row again. With the archive's `path`, a helper process does each document's
    pure work (reading it, tokenizing, anchors) while this one writes (`prepared_documents`)."""
    generation = Generation(conn, now, "rebuild")
    with write_transaction(conn):
        generation.id()
        full_text_merges.hold(conn)
    try:
        result = _reindex_all(conn, handlers, generation, progress, path)
        merged = full_text_merges.release(conn)
    except BaseException:  # interrupted, or failed (a full disk): a maintenance pass catches up
        _lapse_quietly(conn)
        raise
    kept = term_counts.refresh(conn)  # read without the write lock, like a maintenance pass
    return {**result, "fullTextMergeSteps": merged["steps"], "termCountsKept": kept}


def _reindex_all(
    conn: apsw.Connection,
    handlers: Sequence[IndexHandler],
    generation: Generation,
    progress: Callable[[int, int], None] | None,
    path: str | None,
) -> dict:
    """Every document's derived rows replaced, then those of documents that no longer qualify
    dropped; the lease on the held merges renewed at each transaction's end."""
    sql = queries("index")
    outcomes: dict[str, dict[str, int]] = {}
    documents = conn.execute(sql["count_documents"]).fetchone()[0]
    full_text = FullTextRows()  # a transaction's FTS5 rows, one segment (cwa/store/derived.py)

    def reindex(item: object) -> None:
        row, _, prepared, deflated = item
        drop_derived(conn, row, full_text)
        found = conn.execute(sql["indexable_document"], (row,)).fetchone()
        if found is None:  # it left every mode (or lost its root) since the list was read
            return
        loaded = prepared if prepared is not None else load_target(conn, row, found[0], found[1])
        target = dataclasses.replace(loaded, rebuild=True, full_text=full_text)
        for handler, outcome in run_handlers(conn, handlers, generation.id(), target).items():
            counts = outcomes.setdefault(handler, {})
            counts[outcome] = counts.get(outcome, 0) + 1
        generation.mark(row)
        leave_queue(conn, row, deflated)  # it needs no other indexing (its chunks stay as they are)

    stream = prepared_documents(conn, path, handlers, _documents(conn), documents, deflate=False)

    def ending() -> None:  # the transaction's FTS5 rows, and its documents marked in one statement
        full_text.write(conn)
        generation.write_marks()
        full_text_merges.renew(conn)

    _batches(conn, stream, documents, reindex, progress, ending)
    stale = [row for (row,) in conn.execute(sql["stale_derived_documents"])]
    _batches(conn, stale, len(stale), lambda row: drop_derived(conn, row), ending=lambda: full_text_merges.renew(conn))
    with write_transaction(conn):
        conn.execute(sql["drop_stray_fts_rows"])
        conn.execute(sql["recount_windows"])
        conn.execute(sql["recompute_project_spans"])  # the old ids' ranges go
        term_counts.forget(conn)  # a new tokenizer may count otherwise
        generation.finish()
    return {"generation": generation.id(), "documents": documents, "outcomes": outcomes}


def _lapse_quietly(conn: apsw.Connection) -> None:
    """A failed rebuild leaves its held merges to the next maintenance pass; if even that write
    fails, its lease runs out by itself (the rebuild's own failure is the one reported)."""
    try:
        full_text_merges.lapse(conn)
    except apsw.Error:
        pass


def _documents(conn: apsw.Connection) -> Iterator[tuple[int, str, int, bool]]:
    """The documents a rebuild indexes, in row order, as the index queue lists them (indexable)."""
    sql = queries("index")["all_documents"]
    pages = by_row(lambda after: conn.execute(sql, {"after": after, "limit": PAGE}).fetchall())
    return ((row, kind, length, True) for row, kind, length in pages)


def backfill_if_needed(
    conn: apsw.Connection, handlers: Sequence[IndexHandler], clock: Callable[[], str]
) -> dict | None:
    """After an upgrade from schema 1 (migration 0007's marker), rebuild the derived indexes once
    so the documents written before they existed can be found; None when there is nothing to do.
    Two processes opening the archive at once may both rebuild: the result is the same."""
    sql = queries("index")
    if not conn.execute(sql["backfill_needed"]).fetchone()[0]:
        return None
    result = rebuild_indexes(conn, handlers, clock())
    with write_transaction(conn):
        conn.execute(sql["backfill_done"])
    return result
