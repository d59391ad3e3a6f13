"""What keeps a document from expiring: pins, active-context protection (and search leases,
cwa/store/leases.py). Protections win over expiry; redaction wins over all of them.

- A pin holds one document version until it is unpinned (`cwa pin`, `cwa unpin`); a pinned
  version has no expiry entry, and unpinning schedules it again from its creation time.
- A host declares the document versions its live context depends on, per client: each `protect`
  call replaces that client's whole set (at most 1,000 versions, validated all or nothing) for
  `ttlSeconds`; `release` drops only that client's set; a client that stops renewing loses its
  protection when its rows expire, and maintenance deletes them.
"""

from __future__ import annotations

from typing import Any

import apsw

from cwa.errors import Conflict
from cwa.store import retention
from cwa.store.connection import write_transaction
from cwa.store.reads import find_document
from cwa.store.sqlfiles import queries
from cwa.timestamps import shift
from cwa.vocabulary import READABLE_STATES

DEFAULT_PROTECTION_SECONDS = 3600


def set_pin(conn: apsw.Connection, document_id: str, version: int | None, pinned: bool, plan: dict[str, int],
            project: str | None = None) -> dict:
    doc = find_document(conn, document_id, version, project)
    if pinned and doc["state"] not in READABLE_STATES:
        raise Conflict(f"{document_id} v{doc['version']} is {doc['state']}: there is nothing left to pin",
                       documentId=document_id, version=doc["version"], state=doc["state"])
    sql = queries("lifecycle")
    with write_transaction(conn):
        conn.execute(sql["set_pinned"], {"row": doc["row"], "pinned": int(pinned)})
        retention.schedule(conn, doc["row"], doc["retentionClass"], plan)  # pinned: no entry
    return {"documentId": document_id, "version": doc["version"], "pinned": pinned}


def protect(conn: apsw.Connection, client_id: str, documents: list[dict[str, Any]], ttl_seconds: int, now: str,
            project: str | None = None) -> dict:
    """Replace `client_id`'s protected set; every reference must resolve or nothing changes."""
    rows = [find_document(conn, ref["documentId"], ref.get("version"), project)["row"] for ref in documents]
    sql = queries("lifecycle")
    until = shift(now, ttl_seconds)
    with write_transaction(conn):
        conn.execute(sql["release_client"], (client_id,))
        conn.executemany(sql["protect"], [(client_id, row, until) for row in set(rows)])
    return {"clientId": client_id, "protected": len(set(rows)), "expiresAt": until}


def release(conn: apsw.Connection, client_id: str) -> dict:
    with write_transaction(conn):
        conn.execute(queries("lifecycle")["release_client"], (client_id,))
        released = conn.changes()
    return {"clientId": client_id, "released": released}
