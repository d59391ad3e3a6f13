"""FTS5's merges of deleted rows, held while a rebuild deletes every row and caught up after it.

The FTS5 tables are contentless with `contentless_delete`: a deleted row becomes a tombstone in
each segment that holds it, and FTS5 merges a level again once a tenth of its rows are tombstones
(its `deletemerge` option, 10 by default). A rebuild deletes every document's rows and writes them
again, so the archive's largest segments crossed that share again and again and were rewritten
each time, most of the rows they still held about to be deleted too. A rebuild holds those merges
(`deletemerge` 0) and, at its end, merges what its deletes left away at once, in short
transactions (docs/performance.md "A rebuild's deletes merged once").

FTS5 stores the option in the archive, so a rebuild that dies half way would leave it held. The
holder keeps a lease (`meta`, renewed at each of its transactions); a maintenance pass that finds
one run out releases the merges and catches them up (`release_lapsed`). The lease is wall-clock
time: it says whether the holder still lives, not an archive date.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import apsw

from cwa.store.connection import in_short_transactions, write_transaction
from cwa.store.sqlfiles import queries

DEFAULT_DELETE_MERGE = 10  # FTS5's own default, which cwa otherwise never changes
LEASE_SECONDS = 300.0  # a holder that has not renewed for this long has died
STEP_SECONDS = 0.2  # about as long as one merging transaction is meant to hold the write lock
FIRST_PAGES, MIN_PAGES, MAX_PAGES = 64, 16, 4096  # leaf pages a merging step asks for
TABLES = ("window_fts", "anchor_postings")


def hold(conn: apsw.Connection) -> None:
    """Hold the merges of deleted rows, inside the caller's write transaction."""
    conn.execute(queries("full_text_merges")["set_delete_merge"], {"percent": 0})
    renew(conn)


def renew(conn: apsw.Connection) -> None:
    """Keep the lease, inside the caller's write transaction (it is written again if another
    holder's release took it: the merges may be released twice, never lost)."""
    conn.execute(queries("full_text_merges")["set_lease"], {"until": time.time() + LEASE_SECONDS})


def lapse(conn: apsw.Connection) -> None:
    """End the lease but keep the merges held, for a holder that failed: the next maintenance pass
    releases them (a live writer's own merging never meets the backlog)."""
    with write_transaction(conn):
        conn.execute(queries("full_text_merges")["set_lease"], {"until": 0})


def held(conn: apsw.Connection) -> float | None:
    """Until when (seconds since the epoch) a holder's lease runs; None when no merges are held."""
    row = conn.execute(queries("full_text_merges")["lease"]).fetchone()
    return None if row is None else float(row[0])


def release(conn: apsw.Connection, steps: int | None = None) -> dict[str, int | bool]:
    """Catch up on the merges held, a step of about STEP_SECONDS a transaction with a gap after it
    (`in_short_transactions`), then let FTS5 merge deleted rows again and end the lease. Each step
    allows those merges inside its own transaction only: until the backlog is gone, no other
    writer's merging meets it. With `steps`, at most that many steps that merged; what may be left
    waits for a maintenance pass (the lease lapsed). Returns the steps that merged and whether
    merging is `done`."""
    sql = queries("full_text_merges")
    budget = steps if steps is not None else sys.maxsize
    taken = 0
    for table in TABLES:
        taken += in_short_transactions(conn, budget - taken, 1, _merging(sql[f"merge_{table}"]), lambda _: 1)
        if taken >= budget:
            lapse(conn)
            return {"steps": taken, "done": False}
    with write_transaction(conn):
        conn.execute(sql["set_delete_merge"], {"percent": DEFAULT_DELETE_MERGE})
        conn.execute(sql["end_lease"])
    return {"steps": taken, "done": True}


def release_lapsed(conn: apsw.Connection, steps: int) -> dict[str, int | bool] | None:
    """A maintenance pass's part: release merges whose holder's lease ran out (it died, or its
    release ran out of steps), at most `steps` merging steps; None when none are held so."""
    until = held(conn)
    if until is None or until > time.time():
        return None
    return release(conn, steps)


def _merging(statement: str) -> Callable[[apsw.Connection, int], int]:
    """A merging step for `in_short_transactions` (1 when FTS5 found work, 0 when none is left),
    each asking for as many leaf pages as the last one's pace fits in STEP_SECONDS."""
    pages = FIRST_PAGES

    def step(conn: apsw.Connection, _: int) -> int:
        nonlocal pages
        started = time.monotonic()
        merged = _merge_step(conn, statement, pages)
        pages = _next_pages(pages, time.monotonic() - started)
        return int(merged)

    return step


def _next_pages(pages: int, spent: float) -> int:
    """The pages the next step asks for: as many as fit STEP_SECONDS at the last step's pace, at
    most twice as many (a page's cost varies: reading segments whose rows are all deleted writes
    no page at all)."""
    fitting = round(pages * STEP_SECONDS / max(spent, 1e-3))
    return max(MIN_PAGES, min(MAX_PAGES, 2 * pages, fitting))


def _merge_step(conn: apsw.Connection, statement: str, pages: int) -> bool:
    """Up to `pages` leaf pages of merging inside the caller's transaction, deleted rows' merges
    allowed for it alone: whether FTS5 found work (its 'merge' changes nothing else when it finds
    none)."""
    set_delete_merge = queries("full_text_merges")["set_delete_merge"]
    conn.execute(set_delete_merge, {"percent": DEFAULT_DELETE_MERGE})
    before = conn.total_changes()
    conn.execute(statement, {"pages": pages})
    merged = conn.total_changes() - before > 1
    conn.execute(set_delete_merge, {"percent": 0})
    return merged
