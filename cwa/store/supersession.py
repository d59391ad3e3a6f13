"""Explicit supersession: the only way one document hides another.

Valid only for a live, older document of the same project, not the replacement itself, and
without cycles. The superseded version leaves every search mode at once; its locators answer
`superseded` and never the replacement's bytes.
"""

from __future__ import annotations

from typing import Any

import apsw

from cwa.errors import Conflict, InvalidRequest
from cwa.store.connection import write_transaction
from cwa.store.reads import find_document
from cwa.store.sqlfiles import queries


def check_supersession(
    conn: apsw.Connection, old: dict[str, Any], project_row: int, created_at: str, replacement_row: int | None
) -> None:
    """Raise `conflict` unless `old` (a find_document dict) may be superseded by a replacement of
    `project_row` created at `created_at` (`replacement_row` None: not admitted yet)."""
    if old["projectRow"] != project_row:
        raise Conflict(
            "a document can only supersede one of its own project", field="supersedes", reason="other-project"
        )
    if old["state"] != "live":
        raise Conflict(
            f"the superseded document is {old['state']}, not live",
            field="supersedes",
            reason="not-live",
            state=old["state"],
        )
    if old["createdAt"] > created_at:
        raise Conflict("a document can only supersede an older one", field="supersedes", reason="not-older")
    if replacement_row is not None:
        if replacement_row == old["row"]:
            raise InvalidRequest("a document cannot supersede itself", field="by", reason="self")
        replaced = {r[0] for r in conn.execute(queries("search")["supersession_ancestors"], (old["row"],))}
        if replacement_row in replaced:
            raise Conflict("that supersession would make a cycle", field="by", reason="cycle")


def retire(conn: apsw.Connection, old_row: int, now: str) -> None:
    """Mark a document superseded. Admission does this before inserting the replacement, so the
    replacement can take over the subject key (one live document per key)."""
    conn.execute(queries("admission")["mark_superseded"], (now, old_row))


def link(conn: apsw.Connection, old_row: int, replacement_row: int, now: str) -> None:
    """Record which document replaced which (recall answers `superseded` with it)."""
    conn.execute(queries("search")["insert_supersession"], (old_row, replacement_row, now))


def supersede(conn: apsw.Connection, request: dict[str, Any], now: str) -> dict[str, Any]:
    with write_transaction(conn):
        project = request.get("project")
        old = find_document(conn, request["documentId"], request.get("version"), project)
        new = find_document(conn, request["by"]["documentId"], request["by"].get("version"), project)
        if new["state"] != "live":
            raise Conflict(f"the replacement is {new['state']}, not live", field="by", reason="not-live")
        check_supersession(conn, old, new["projectRow"], new["createdAt"], new["row"])
        retire(conn, old["row"], now)
        link(conn, old["row"], new["row"], now)
    return {
        "documentId": old["documentId"],
        "version": old["version"],
        "state": "superseded",
        "replacement": {"documentId": new["documentId"], "version": new["version"]},
    }
