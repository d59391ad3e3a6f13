"""What keeps a document from expiring: pins, active-context protection (and search leases,
cwa/store/leases.py). Protections win over expiry; redaction wins over all of them.

- A pin holds one document version until it is unpinned (`cwa pin`, `cwa unpin`); a pinned
  version has no expiry entry, and unpinning schedules it again from its retention start.
- A host declares the document versions its live context depends on, per client: each `protect`
  call replaces that client's whole set (at most 1,000 versions, validated all or nothing) for
  `ttlSeconds`; `release` drops only that client's set; a client that stops renewing loses its
  protection when its rows expire, and maintenance deletes them. The session engine protects
  what its provider copy names the same way (cwa/session/engine.py).
- A protection that ends — a version leaves the client's set, the client releases it, or it
  lapses — restarts the version's retention clock from that moment (`documents.shown_until`):
  what a live window showed stays readable for its class's days after the window let it go.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import apsw
import orjson

from cwa.errors import Conflict
from cwa.store import retention
from cwa.store.connection import write_transaction
from cwa.store.reads import find_document
from cwa.store.sqlfiles import queries
from cwa.timestamps import shift
from cwa.vocabulary import READABLE_STATES

DEFAULT_PROTECTION_SECONDS = 3600


def set_pin(
    conn: apsw.Connection,
    document_id: str,
    version: int | None,
    pinned: bool,
    plan: dict[str, int],
    project: str | None = None,
) -> dict:
    doc = find_document(conn, document_id, version, project)
    if pinned and doc["state"] not in READABLE_STATES:
        raise Conflict(
            f"{document_id} v{doc['version']} is {doc['state']}: there is nothing left to pin",
            documentId=document_id,
            version=doc["version"],
            state=doc["state"],
        )
    sql = queries("lifecycle")
    with write_transaction(conn):
        conn.execute(sql["set_pinned"], {"row": doc["row"], "pinned": int(pinned)})
        retention.schedule(conn, doc["row"], doc["retentionClass"], plan)  # pinned: no entry
    return {"documentId": document_id, "version": doc["version"], "pinned": pinned}


def protect(
    conn: apsw.Connection,
    client_id: str,
    documents: list[dict[str, Any]],
    ttl_seconds: int,
    now: str,
    project: str | None = None,
) -> dict:
    """Replace `client_id`'s protected set; every reference must resolve or nothing changes."""
    rows = {find_document(conn, ref["documentId"], ref.get("version"), project)["row"] for ref in documents}
    until = shift(now, ttl_seconds)
    with write_transaction(conn):
        replace_protections(conn, client_id, rows, until, now)
    return {"clientId": client_id, "protected": len(rows), "expiresAt": until}


def protect_named(
    conn: apsw.Connection, client_id: str, project: str, document_ids: Collection[str], until: str, now: str
) -> int:
    """`client_id` protects the readable versions of `document_ids` in `project` (and the parts of
    the checkpoint roots among them) until `until`, and nothing else; how many versions. Ids that
    name nothing of the project are left out: a window may quote any text."""
    params = {"ids": orjson.dumps(sorted(document_ids)).decode(), "project": project}
    with write_transaction(conn):
        rows = {row for (row,) in conn.execute(queries("lifecycle")["named_documents"], params)}
        replace_protections(conn, client_id, rows, until, now)
    return len(rows)


def replace_protections(conn: apsw.Connection, client_id: str, rows: set[int], until: str, now: str) -> int:
    """Inside the caller's transaction: `client_id` protects exactly `rows` until `until`; each
    version that leaves its set ends its protection now (or when it lapsed, if earlier). Returns
    how many ended."""
    sql = queries("lifecycle")
    ended = 0
    for row, expires_at in conn.execute(sql["client_protections"], (client_id,)).fetchall():
        if row not in rows:
            conn.execute(sql["drop_client_protection"], (client_id, row))
            retention.restart_clock(conn, row, min(now, expires_at))
            ended += 1
    conn.executemany(sql["protect"], [(client_id, row, until) for row in rows])
    return ended


def release(conn: apsw.Connection, client_id: str, now: str) -> dict:
    with write_transaction(conn):
        released = replace_protections(conn, client_id, set(), now, now)
    return {"clientId": client_id, "released": released}


def end_lapsed(conn: apsw.Connection, now: str, limit: int) -> int:
    """Delete at most `limit` lapsed protections (maintenance), each ending when it lapsed."""
    sql = queries("lifecycle")
    lapsed = conn.execute(sql["lapsed_protections"], {"now": now, "limit": limit}).fetchall()
    for client_id, row, expires_at in lapsed:
        conn.execute(sql["drop_client_protection"], (client_id, row))
        retention.restart_clock(conn, row, expires_at)
    return len(lapsed)
