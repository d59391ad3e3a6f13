"""Projects and sessions: rows created on first sight, lineage recorded once.

A session's parent is set the first time it is named and never changed; a cycle is refused.
"""

from __future__ import annotations

import apsw

from cwa.errors import Conflict
from cwa.store.sqlfiles import queries

# Links walked up from a session: a host records at most MAX_LINEAGE_DEPTH at a time, and a chain
# grows as sessions fork from forks; past this many, older ancestors are out of a session's scope.
MAX_ANCESTRY = 64


def ancestry(conn: apsw.Connection, session_row: int) -> list[tuple[int, str]]:
    """The session and its recorded ancestors, nearest first: (row, session key) pairs."""
    return list(conn.execute(queries("sessions")["session_ancestry"], {"session": session_row, "depth": MAX_ANCESTRY}))


def lineage_rows(conn: apsw.Connection, session_row: int) -> list[int]:
    """The rows of the session and its recorded ancestors, nearest first."""
    return [row for row, _ in ancestry(conn, session_row)]


def lineage_of_key(conn: apsw.Connection, project_row: int, session_key: str) -> list[int]:
    """`lineage_rows` of a session named by its key (empty when the project has no such session)."""
    found = conn.execute(queries("sessions")["session_row"], (project_row, session_key)).fetchone()
    return lineage_rows(conn, found[0]) if found else []


def ensure_project(conn: apsw.Connection, identity: str, now: str) -> int:
    sql = queries("admission")
    row = conn.execute(sql["find_project"], (identity,)).fetchone()
    if row:
        return row[0]
    conn.execute(sql["insert_project"], (identity, now))
    return conn.last_insert_rowid()


def ensure_session(conn: apsw.Connection, project_id: int, session_key: str, parent_key: str | None, now: str) -> int:
    """The session's row, created if new; its parent is recorded once and never changed."""
    sql = queries("admission")
    parent_row = None
    if parent_key is not None:
        found = conn.execute(sql["find_session"], (project_id, parent_key)).fetchone()
        if found:
            parent_row = found[0]
        else:  # the parent's own documents may arrive later
            conn.execute(sql["insert_session"], (project_id, parent_key, None, now))
            parent_row = conn.last_insert_rowid()
    row = conn.execute(sql["find_session"], (project_id, session_key)).fetchone()
    if row is None:
        conn.execute(sql["insert_session"], (project_id, session_key, parent_row, now))
        return conn.last_insert_rowid()
    session_row, recorded_parent = row
    if parent_row is None or recorded_parent == parent_row:
        return session_row
    if recorded_parent is not None:
        raise Conflict(
            f"session {session_key!r} already records a different parent session",
            field="parentSessionId",
            reason="lineage-mismatch",
        )
    ancestors = set(lineage_rows(conn, parent_row))
    if session_row in ancestors:
        raise Conflict(
            f"recording {parent_key!r} as the parent of {session_key!r} would make a cycle",
            field="parentSessionId",
            reason="lineage-cycle",
        )
    conn.execute(sql["set_session_parent"], (parent_row, session_row))
    return session_row


def record_lineage(conn: apsw.Connection, project_id: int, session_key: str, lineage: list[str], now: str) -> list[str]:
    """Record `lineage` (the session's ancestors, nearest first) link by link, farthest first, and
    return the chain the archive now holds for the session. Each parent is still recorded once:
    a link that contradicts a recorded one is `conflict`, and nothing of the call is kept."""
    chain = [session_key, *lineage]
    with conn:
        for child, parent in reversed(list(zip(chain, chain[1:] + [None]))):
            row = ensure_session(conn, project_id, child, parent, now)
        held = [key for _, key in ancestry(conn, row)[1:]]
    return held
