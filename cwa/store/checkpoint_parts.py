"""Checkpoint parts are usable only with their root.

A checkpoint writes its parts first and its root last (cwa/session/checkpoint.py). A part is
admitted without derived rows, so nothing finds it; the root's admission links the parts its
manifest names (`checkpoint_parts`, in the root's transaction), and then each linked part is
indexed in a transaction of its own. A part no root names — a checkpoint killed or failed before
its root — is an orphan: never searchable, and expired by maintenance once it is older than
ORPHAN_GRACE_HOURS (a checkpoint still writing its parts elsewhere is younger than that), its
identity released so that a retry writes it afresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from cwa import limits
from cwa.store.connection import write_transaction
from cwa.store.derived import IndexHandler, index_deferred, load_target
from cwa.store.sqlfiles import queries
from cwa.timestamps import shift

ORPHAN_GRACE_HOURS = 24
INDEX_BATCH = 64  # linked parts indexed per call of index_linked


def link_parts(conn: apsw.Connection, root_row: int, metadata: dict[str, Any] | None) -> int:
    """In the root's admission transaction: link the parts its manifest names; how many."""
    manifest = (metadata or {}).get("checkpoint") if isinstance(metadata, dict) else None
    parts = manifest.get("parts") if isinstance(manifest, dict) else None
    linked = 0
    for part in parts if isinstance(parts, list) else ():
        if isinstance(part, list) and len(part) >= 2 and isinstance(part[0], str) and isinstance(part[1], int):
            conn.execute(
                queries("checkpoints")["link_part"], {"root": root_row, "document_id": part[0], "version": part[1]}
            )
            linked += conn.changes()
    return linked


def index_linked(
    conn: apsw.Connection,
    handlers: Sequence[IndexHandler],
    now: str,
    root_row: int | None = None,
    limit: int = INDEX_BATCH,
) -> int:
    """Index linked parts that have no derived rows yet (of one root, or any), each in its own
    transaction; how many. Also what recovers a root whose process died before its parts were
    indexed (maintenance runs it)."""
    sql = queries("checkpoints")
    done = 0
    while done < limit:
        rows = conn.execute(sql["unindexed_parts"], {"root": root_row, "limit": 1}).fetchall()
        if not rows:
            break
        row, byte_length = rows[0]
        with write_transaction(conn):
            index_deferred(conn, handlers, now, load_target(conn, row, "checkpoint-part", byte_length))
        done += 1
    return done


# What may stop a root's parts from being indexed after the root committed: derived work that
# maintenance finishes later, never a reason to call the archived input lost.
DEFERRABLE = (apsw.FullError, apsw.BusyError)


def index_root_parts(conn: apsw.Connection, handlers: Sequence[IndexHandler], now: str, root_row: int) -> int:
    """After a root's commit: index its parts now; on a full disk or a long lock, leave the rest to
    maintenance (`index_linked`) and say how many wait. The root and its parts are durable either
    way: the input is archived exactly, only its search rows are pending."""
    try:
        index_linked(conn, handlers, now, root_row=root_row, limit=limits.UNBOUNDED)
    except DEFERRABLE:
        pass
    return unindexed_parts(conn, root_row)


def unindexed_parts(conn: apsw.Connection, root_row: int) -> int:
    """How many of a root's linked parts still have no derived rows."""
    return conn.execute(queries("checkpoints")["unindexed_part_count"], {"root": root_row}).fetchone()[0]


def expire_orphans(conn: apsw.Connection, now: str, limit: int) -> int:
    """Expire the orphan parts older than the grace period (their bytes go with the purge)."""
    lifecycle, sql = queries("lifecycle"), queries("checkpoints")
    before = shift(now, -ORPHAN_GRACE_HOURS * 3600)
    rows = [r[0] for r in conn.execute(sql["orphan_parts"], {"before": before, "limit": limit})]
    for row in rows:
        conn.execute(lifecycle["set_state"], {"row": row, "state": "expired", "now": now})
        conn.execute(lifecycle["unschedule_document"], (row,))
        conn.execute(lifecycle["queue_purge"], (row, "expired", now))
        conn.execute(sql["release_identity"], {"row": row})
    return len(rows)


def orphan_count(conn: apsw.Connection) -> int:
    return conn.execute(queries("checkpoints")["orphan_count"]).fetchone()[0]
