"""Ending a transaction that failed, without hiding why it failed."""

from __future__ import annotations

import apsw


def roll_back(conn: apsw.Connection) -> None:
    """Roll back what is still open. SQLite may have rolled the transaction back itself (a full
    disk, an I/O error): then there is nothing to do, and the caller's error is the one to report."""
    if conn.get_autocommit():
        return
    try:
        conn.execute("ROLLBACK")
    except apsw.Error:
        pass  # the caller re-raises the original error; this one would only hide it
