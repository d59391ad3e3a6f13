"""Which documents a request may read: a session and its lineage, a project, or everything.

`all` is capped by `maxReadScope`, which only the user-global config can set; a wider request is
narrowed to the cap and the response says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw
import orjson

from cwa.errors import InvalidRequest
from cwa.store.sessions import lineage_of_key
from cwa.store.sqlfiles import queries
from cwa.vocabulary import SCOPES


@dataclass(frozen=True)
class Scope:
    requested: str
    effective: str
    project: str | None  # identity
    session: str | None  # session key
    project_row: int | None  # None: every project
    session_rows: str | None  # JSON array of session row ids, or None: every session
    empty: bool  # the project or session is unknown: nothing can match

    def params(self) -> dict:
        return {"project": self.project_row, "sessions": self.session_rows}


def resolve_scope(
    conn: apsw.Connection, requested: str, project: str | None, session: str | None, max_scope: str
) -> Scope:
    effective = SCOPES[min(SCOPES.index(requested), SCOPES.index(max_scope))]
    if effective in ("session", "project") and project is None:
        raise InvalidRequest(f"scope {effective!r} needs a project", field="project", reason="missing")
    if effective == "session" and session is None:
        raise InvalidRequest("scope 'session' needs a sessionId", field="sessionId", reason="missing")
    sql = queries("search")
    if effective == "all":
        return Scope(requested, effective, project, session, None, None, False)
    row = conn.execute(sql["project_id"], (project,)).fetchone()
    if row is None:
        return Scope(requested, effective, project, session, -1, None, True)
    if effective == "project":
        return Scope(requested, effective, project, session, row[0], None, False)
    lineage = lineage_of_key(conn, row[0], session)
    return Scope(requested, effective, project, session, row[0], orjson.dumps(lineage).decode(), not lineage)
