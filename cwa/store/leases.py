"""Search leases: a search protects the versions it returned for a while (default 5 minutes),
so expiry cannot remove what an agent is about to recall."""

from __future__ import annotations

import secrets

import apsw

from cwa.store.connection import brief_wait, write_transaction
from cwa.store.sqlfiles import queries
from cwa.timestamps import shift

DEFAULT_LEASE_SECONDS = 300


def grant_lease(
    conn: apsw.Connection, project_id: int, document_rows: list[int], now: str, seconds: int
) -> tuple[str, str]:
    """Create a lease over `document_rows`; return (lease id, expiry). Waits at most a brief
    moment for another writer (BusyError: the caller answers without a lease)."""
    sql = queries("search")
    lease_id = "lease-" + secrets.token_hex(8)
    expires = shift(now, seconds)
    with brief_wait(conn), write_transaction(conn):
        conn.execute(sql["insert_lease"], (lease_id, project_id, now, expires))
        conn.executemany(sql["insert_lease_document"], [(lease_id, row) for row in set(document_rows)])
    return lease_id, expires


def lease_active(conn: apsw.Connection, lease_id: str, now: str) -> bool:
    row = conn.execute(queries("search")["lease_expiry"], (lease_id,)).fetchone()
    return bool(row) and row[0] > now
