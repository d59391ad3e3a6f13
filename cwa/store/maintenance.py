"""One bounded, resumable maintenance pass (`cwa maintain`, and periodically inside `cwa serve`).

Each task touches at most `limit` rows in short transactions (the purge, the costliest, 50
documents at a time), so a pass never holds the write lock for long; `more` says another pass has
work left. In order:

1. retention: re-plan the classes whose settings changed, then act on due expiries
   (cwa/store/retention.py);
2. purge: bytes and derived rows of expired and redacted documents (cwa/store/purge.py);
3. clean-ups: expired search leases and context protections, the preflight ledgers (exposures past
   their cooldown tombstoned, old tombstones deleted, hint records idle for 30 days reclaimed);
4. space: when at least RECLAIM_MIN_BYTES of free pages exist, `PRAGMA incremental_vacuum` gives
   them back to the file system, and the WAL is checkpointed. With `vacuum`, a full VACUUM instead
   (which also turns an archive created without auto_vacuum into an incremental one).
"""

from __future__ import annotations

import time
from typing import Any

import apsw

from cwa import limits
from cwa.store import exposure_ledger, hint_ledger, purge, retention
from cwa.store.connection import write_transaction
from cwa.store.sqlfiles import queries
from cwa.store.workers import DaemonWorker

RECLAIM_MIN_BYTES = 1 << 20
PURGE_BATCH = 50  # documents purged per transaction
YIELD_SECONDS = 0.03


def maintain(conn: apsw.Connection, now: str, limit: int, plan: dict[str, int], vacuum: bool = False) -> dict[str, Any]:
    sql = queries("lifecycle")
    with write_transaction(conn):
        replanned = retention.replan(conn, plan)
        expiry = retention.expire_due(conn, now, plan, limit)
    purged = 0
    while purged < limit:  # in small transactions: a waiting request never waits for a whole pass
        wanted = min(PURGE_BATCH, limit - purged)
        with write_transaction(conn):
            batch = purge.purge(conn, wanted)
        purged += batch
        if batch < wanted:  # the queue ran dry
            break
        time.sleep(YIELD_SECONDS)  # a gap for writers polling SQLite's lock (it is not a fair queue)
    with write_transaction(conn):
        conn.execute(sql["expired_leases"], {"now": now, "limit": limit})
        leases = conn.changes()
        conn.execute(sql["expired_protections"], {"now": now, "limit": limit})
        protections = conn.changes()
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
    }
    # (a postponed entry is due again only when its protection ends, so it never counts here)
    more = any(count >= limit for count in done.values()) or purge.pending(conn) > 0
    more = more or retention.due_count(conn, now) > 0
    return {**done, "replannedClasses": replanned, "space": _reclaim(conn, vacuum), "more": more}


def _reclaim(conn: apsw.Connection, vacuum: bool) -> dict[str, Any]:
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    before = conn.execute("PRAGMA page_count").fetchone()[0] * page_size
    free = conn.execute("PRAGMA freelist_count").fetchone()[0] * page_size
    action = None
    if vacuum:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # takes effect with the VACUUM below
        conn.execute("VACUUM")
        action = "vacuum"
    elif free >= RECLAIM_MIN_BYTES:
        conn.execute("PRAGMA incremental_vacuum").fetchall()  # frees pages as it is stepped: run it out
        action = "incremental-vacuum"
    if action:
        # PASSIVE never blocks writers (TRUNCATE holds them off while it copies the whole WAL); a
        # full VACUUM is an explicit, exclusive request, so it may also cut the WAL file back.
        mode = "TRUNCATE" if vacuum else "PASSIVE"
        try:
            conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchall()
        except apsw.BusyError:
            pass  # a reader holds the WAL: the next pass checkpoints
    after = conn.execute("PRAGMA page_count").fetchone()[0] * page_size
    return {"action": action, "freeBytesBefore": free, "fileBytesBefore": before, "fileBytesAfter": after}


DEFAULT_INTERVAL_SECONDS = 600  # between the passes `cwa serve` runs


class PeriodicMaintenance(DaemonWorker):
    """One bounded pass every `interval` seconds from a daemon thread of `cwa serve`."""

    name = "cwa-maintain"

    def __init__(self, path: str, clock, plan: dict[str, int], interval: float) -> None:
        super().__init__(path, interval)
        self.clock, self.plan = clock, plan
        self.passes = 0

    def step(self, conn: apsw.Connection) -> bool:
        maintain(conn, self.clock(), limits.DEFAULT_MAINTENANCE_STEPS, self.plan)
        self.passes += 1
        return True
