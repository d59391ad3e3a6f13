"""Scoped redaction: remove a session's or a project's documents now, and their bytes soon.

Two steps, so nothing goes by accident: without a token, `redact` counts the documents in scope
and returns a confirm token bound to exactly that set (a keyed hash with the archive's secret);
with the token, and only while the set is unchanged, every document in scope is tombstoned in one
transaction — at once out of search, preflight and recall — whatever pins, leases or context
protections held it, its frozen hints replay as nothing (`source-redacted`), the session engine
shows REDACTED_PREVIEW instead of its previews from the next rebuild on, and its rows are queued
for the purge of bytes and derived rows (cwa/store/purge.py, run by maintenance).
Pi's own session files are never touched: cwa only ever writes its archive.
"""

from __future__ import annotations

import hmac
from typing import Any

import apsw
import orjson

from cwa.errors import Conflict
from cwa.store.connection import write_transaction
from cwa.store.secret import archive_mac
from cwa.store.sqlfiles import queries
from cwa.vocabulary import SUPPRESS

REDACTED_PREVIEW = "[this archived content was redacted]"  # what a session's provider copy shows instead
BLANK_HINT = {
    "hints": [],
    "diagnostics": {
        "outcome": SUPPRESS,
        "reason": "source-redacted",
        "metrics": {},
        "generation": None,
        "decidedAt": None,
        "frozen": False,
    },
}


def _token(conn: apsw.Connection, project: str, session: str | None, rows: list[int]) -> str:
    return "redact-" + archive_mac(conn, orjson.dumps({"project": project, "session": session, "rows": rows}), 24)


def _in_scope(conn: apsw.Connection, project: str, session: str | None) -> list[int]:
    found = conn.execute(queries("lifecycle")["scope_documents"], {"project": project, "session": session})
    return [r[0] for r in found]


def redact(conn: apsw.Connection, project: str, session: str | None, confirm: str | None, now: str) -> dict[str, Any]:
    scope = {"project": project, "sessionId": session}
    rows = _in_scope(conn, project, session)
    if confirm is None:
        return {"scope": scope, "documents": len(rows), "confirm": _token(conn, project, session, rows), "redacted": 0}
    sql = queries("lifecycle")
    with write_transaction(conn):
        rows = _in_scope(conn, project, session)
        # as bytes: compare_digest refuses non-ASCII text, and a token is whatever the caller typed
        if not hmac.compare_digest(confirm.encode("utf-8"), _token(conn, project, session, rows).encode()):
            raise Conflict(
                "the confirm token does not match the documents now in scope (run without --confirm again to see them)",
                reason="stale-token",
                documents=len(rows),
            )
        listed = orjson.dumps(rows).decode()
        for row in rows:
            conn.execute(sql["set_state"], {"row": row, "state": "tombstoned", "now": now})
            conn.execute(sql["set_pinned"], {"row": row, "pinned": 0})
            conn.execute(sql["unschedule_document"], (row,))
            conn.execute(sql["queue_purge"], (row, "redacted", now))
        conn.execute(sql["blank_hints_from"], {"rows": listed, "response": orjson.dumps(BLANK_HINT).decode()})
        conn.execute(
            queries("session")["redact_replacements"],
            {"rows": listed, "text": REDACTED_PREVIEW, "tokens": len(REDACTED_PREVIEW) // 4 + 4},
        )
        conn.execute(sql["drop_protections_of"], {"rows": listed})
        conn.execute(sql["drop_lease_documents_of"], {"rows": listed})
    return {"scope": scope, "documents": len(rows), "confirm": confirm, "redacted": len(rows)}
