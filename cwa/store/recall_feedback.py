"""The relevance-feedback log: which search results were recalled (read by the importance prior)."""

from __future__ import annotations

import apsw

from cwa.store.connection import BOOKKEEPING_SKIPPED, brief_wait
from cwa.store.sqlfiles import queries


def record(conn: apsw.Connection, document_row: int, now: str, lease_id: str | None) -> None:
    """Log one recall of a locator a search handed out. Best effort: a busy or read-only archive
    still answers the recall."""
    try:
        with brief_wait(conn):
            conn.execute(queries("ranking")["record_recall"], (document_row, now, lease_id))
    except BOOKKEEPING_SKIPPED:
        pass
