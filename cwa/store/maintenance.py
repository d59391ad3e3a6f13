"""One bounded, resumable maintenance pass (`cwa maintain`, and periodically inside `cwa serve`).

Each task touches at most `limit` rows in short transactions (the purge, the costliest, 50
documents at a time), so a pass never holds the write lock for long; `more` says another pass has
work left. In order:

1. retention: end the lapsed context protections (each restarts its document's retention clock,
   cwa/store/protection.py), re-plan the classes whose settings changed, then act on due expiries
   (cwa/store/retention.py);
2. purge: bytes and derived rows of expired and redacted documents (cwa/store/purge.py);
3. vectors stored as float32 before migration 0018 moved into `window_vectors` as int8,
   20 × `limit` a pass (cwa/store/vector_format.py); then as many sign bits packed in blocks
   (cwa/store/vector_blocks.py); then chunks stored before migration 0038 deflated, as many
   (cwa/store/chunk_packing.py); then the FTS5 merges a rebuild that died held, caught up
   (at most `limit` short steps; cwa/store/full_text_merges.py);
4. clean-ups: expired search leases, the preflight ledgers (exposures past
   their cooldown tombstoned, old tombstones deleted, hint records idle for 30 days reclaimed);
5. space: when at least RECLAIM_MIN_BYTES of free pages exist, `PRAGMA incremental_vacuum` gives
   them back to the file system, and the WAL is checkpointed. With `vacuum`, a full VACUUM instead
   (which also turns an archive created without auto_vacuum into an incremental one).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import apsw

from cwa import limits
from cwa.store import (
    checkpoint_parts,
    chunk_packing,
    exposure_ledger,
    full_text_merges,
    hint_ledger,
    index_queue,
    protection,
    purge,
    retention,
    term_counts,
    vector_blocks,
    vector_format,
)
from cwa.store.connection import TEMP_STORE, write_transaction
from cwa.store.derived import IndexHandler
from cwa.store.sqlfiles import queries
from cwa.store.status import file_pages
from cwa.store.workers import DaemonWorker

RECLAIM_MIN_BYTES = 1 << 20
PURGE_BATCH = 50  # documents purged per transaction
VECTORS_PER_STEP = 20  # float32 vectors converted to int8 per step of a pass (cwa/store/vector_format.py)
CHUNKS_PER_STEP = 20  # chunks stored before migration 0038 looked at per step (cwa/store/chunk_packing.py)
YIELD_SECONDS = 0.03
VACUUM_PAGES = 2048  # pages freed per incremental-vacuum step (8 MiB of 4 KiB pages)
INCREMENTAL = 2  # PRAGMA auto_vacuum's value for incremental


def maintain(
    conn: apsw.Connection,
    now: str,
    limit: int,
    plan: dict[str, int],
    vacuum: bool = False,
    handlers: Sequence[IndexHandler] = (),
) -> dict[str, Any]:
    """One bounded pass. With the index `handlers`, it also indexes checkpoint parts whose root
    committed but whose process died before indexing them, and what waits in the index queue."""
    sql = queries("lifecycle")
    with write_transaction(conn):
        protections = protection.end_lapsed(conn, now, limit)  # first: each restarts a retention clock
        replanned = retention.replan(conn, plan)
        expiry = retention.expire_due(conn, now, plan, limit)
        orphans = checkpoint_parts.expire_orphans(conn, now, limit)
    parts_indexed = checkpoint_parts.index_linked(conn, handlers, now, limit=limit) if handlers else 0
    queued_indexed = index_queue.index_queued(conn, handlers, now, limit=limit) if handlers else 0
    purged = 0
    while purged < limit:  # in small transactions: a waiting request never waits for a whole pass
        wanted = min(PURGE_BATCH, limit - purged)
        with write_transaction(conn):
            batch = purge.purge(conn, wanted, handlers, now)
        purged += batch
        if batch < wanted:  # the queue ran dry
            break
        time.sleep(YIELD_SECONDS)  # a gap for writers polling SQLite's lock (it is not a fair queue)
    merges = full_text_merges.release_lapsed(conn, limit)
    terms = term_counts.refresh(conn)
    converted = vector_format.convert(conn, limit * VECTORS_PER_STEP)
    packed = vector_blocks.pack(conn, limit * VECTORS_PER_STEP)
    deflated = chunk_packing.pack_stored(conn, limit * CHUNKS_PER_STEP)
    with write_transaction(conn):
        conn.execute(sql["expired_leases"], {"now": now, "limit": limit})
        leases = conn.changes()
        tombstoned, deleted = exposure_ledger.sweep(conn, now, limit)
        reclaimed = hint_ledger.reclaim_idle(conn, now, limit)
    done = {
        "expired": expiry["expired"],
        "expiryPostponed": expiry["postponed"],
        "expiryDropped": expiry["dropped"],
        "purged": purged,
        "leasesDeleted": leases,
        "protectionsDeleted": protections,
        "exposuresTombstoned": tombstoned,
        "exposuresDeleted": deleted,
        "hintRecordsReclaimed": reclaimed,
        "orphanPartsExpired": orphans,
        "checkpointPartsIndexed": parts_indexed,
        "queuedIndexed": queued_indexed,
    }
    # (a postponed entry is due again only when its protection ends, so it never counts here)
    more = any(count >= limit for count in done.values()) or purge.pending(conn) > 0
    more = more or retention.due_count(conn, now) > 0 or vector_format.vectors_to_convert(conn) > 0
    more = more or packed >= limit * VECTORS_PER_STEP or chunk_packing.chunks_to_pack(conn) > 0
    more = more or (merges is not None and not merges["done"])
    return {
        **done,
        "vectorsConverted": converted,
        "vectorsPacked": packed,
        "chunksLookedAt": deflated,
        "fullTextMergeSteps": 0 if merges is None else merges["steps"],
        "termCountsKept": terms,
        "replannedClasses": replanned,
        "space": _reclaim(conn, vacuum),
        "more": more,
    }


def _reclaim(conn: apsw.Connection, vacuum: bool) -> dict[str, Any]:
    before, free = file_pages(conn)
    action = None
    if vacuum:
        # asked for explicitly (--vacuum): the one step that holds the write lock throughout;
        # readers still read, their own bookkeeping writes are skipped (brief_wait)
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # takes effect with the VACUUM below
        # VACUUM builds a copy of the whole archive in temporary storage: on disk, not in memory
        conn.execute("PRAGMA temp_store = FILE")
        try:
            conn.execute("VACUUM")
        finally:
            conn.execute(f"PRAGMA temp_store = {TEMP_STORE}")
        action = "vacuum"
    elif free >= RECLAIM_MIN_BYTES and conn.execute("PRAGMA auto_vacuum").fetchone()[0] == INCREMENTAL:
        _incremental_vacuum(conn)
        action = "incremental-vacuum"
    if action:
        # PASSIVE never blocks writers (TRUNCATE holds them off while it copies the whole WAL); a
        # full VACUUM is an explicit, exclusive request, so it may also cut the WAL file back.
        mode = "TRUNCATE" if vacuum else "PASSIVE"
        try:
            conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchall()
        except apsw.BusyError:
            pass  # a reader holds the WAL: the next pass checkpoints
    after, _ = file_pages(conn)
    return {"action": action, "freeBytesBefore": free, "fileBytesBefore": before, "fileBytesAfter": after}


def _incremental_vacuum(conn: apsw.Connection) -> None:
    """Give every free page back to the file system, VACUUM_PAGES at a time: each step is its own
    short transaction, so a waiting writer (a lease, a preflight decision) gets in between."""
    while conn.execute("PRAGMA freelist_count").fetchone()[0] > 0:
        conn.execute(f"PRAGMA incremental_vacuum({VACUUM_PAGES:d})").fetchall()
        time.sleep(YIELD_SECONDS)


class PeriodicMaintenance(DaemonWorker):
    """One bounded pass every `interval` seconds from a daemon thread of `cwa serve`."""

    name = "cwa-maintain"

    def __init__(
        self, path: str, clock, plan: dict[str, int], interval: float, handlers: Sequence[IndexHandler] = ()
    ) -> None:
        super().__init__(path, interval)
        self.clock, self.plan, self.handlers = clock, plan, tuple(handlers)
        self.passes = 0

    def begin(self, conn: apsw.Connection) -> None:
        # A serve started on a large archive whose common terms' counts are not all kept would
        # count each in a user's turn until the first pass: keep them now (seconds at a million
        # windows, read without the write lock; nothing to do when they are kept already).
        term_counts.refresh(conn)

    def step(self, conn: apsw.Connection) -> bool:
        maintain(conn, self.clock(), limits.DEFAULT_MAINTENANCE_STEPS, self.plan, handlers=self.handlers)
        self.passes += 1
        return True
