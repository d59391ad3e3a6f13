"""A document's identity, place and state, as search results and recall answers report them."""

from __future__ import annotations

from typing import Any

import apsw

from cwa.store.sqlfiles import queries

FIELDS = (
    "row",
    "documentId",
    "version",
    "kind",
    "createdAt",
    "state",
    "projectRow",
    "generation",
    "project",
    "sessionId",
    "sessionRow",
    "textDigest",
    "byteLength",
)


def document_summary(conn: apsw.Connection, row: int) -> dict[str, Any]:
    return dict(zip(FIELDS, conn.execute(queries("search")["document_summary"], (row,)).fetchone()))
