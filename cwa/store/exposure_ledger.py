"""The exposure ledger: which sources automatic hints revealed, and where.

Separate from the hint ledger on purpose: a revealed source stays suppressed for the cooldown
across the session's lineage even after the message that revealed it leaves the context or its
hint record is reclaimed. After the cooldown maintenance tombstones the row, and deletes it
TOMBSTONE_DAYS later.
"""

from __future__ import annotations

from collections.abc import Iterable

import apsw
import orjson

from cwa.store.sqlfiles import queries
from cwa.timestamps import shift

TOMBSTONE_DAYS = 30


def recently_surfaced(conn: apsw.Connection, sessions: list[int], rows: Iterable[int], now: str) -> set[int]:
    rows = list(rows)
    if not rows or not sessions:
        return set()
    params = {"rows": orjson.dumps(rows).decode(), "sessions": orjson.dumps(sessions).decode(), "now": now}
    return {r[0] for r in conn.execute(queries("hints")["surfaced_sources"], params)}


def record_exposures(
    conn: apsw.Connection, session: int, hint_id: int, rows: Iterable[int], now: str, cooldown_hours: int
) -> None:
    until = shift(now, cooldown_hours * 3600)
    conn.executemany(
        queries("hints")["insert_exposure"], [(session, row, hint_id, now, until) for row in dict.fromkeys(rows)]
    )


def sweep(conn: apsw.Connection, now: str, limit: int) -> tuple[int, int]:
    """Tombstone at most `limit` exposures whose cooldown has passed, and delete at most `limit`
    tombstoned TOMBSTONE_DAYS ago. Returns (tombstoned, deleted)."""
    sql = queries("hints")
    cooled = [r[0] for r in conn.execute(sql["cooled_exposures"], (now, limit))]
    conn.executemany(sql["tombstone_exposure"], [(now, i) for i in cooled])
    old = [r[0] for r in conn.execute(sql["old_tombstoned_exposures"], (shift(now, -TOMBSTONE_DAYS * 86_400), limit))]
    conn.executemany(sql["delete_exposure"], [(i,) for i in old])
    return len(cooled), len(old)
