"""Traverse: page through a session's chronology from an authenticated anchor.

The anchor is a signed locator, or a document id of the caller's project (its first message). A
page holds at most MAX_TRAVERSE_PAGE records strictly before or after the anchor, nearest first; at most
`scanLimit` records are examined per call (expired and tombstoned ones are examined, counted and
skipped; superseded ones are returned, flagged with their replacement). The answer carries a
cursor, signed with the archive's secret like a locator, that continues from the last record
examined; a tampered, foreign or unparsable cursor or locator returns no records. Traversal never
leaves the anchor's session, so never its project.
"""

from __future__ import annotations

from typing import Any

import apsw

from cwa import limits
from cwa.errors import NotFound
from cwa.retrieve import packet, render
from cwa.retrieve.chronology import Record, record_at, records_from
from cwa.retrieve.locators import sign_values, verify, verify_values
from cwa.store.reads import find_document, message_at
from cwa.store.secret import archive_secret
from cwa.store.sqlfiles import queries
from cwa.vocabulary import DIRECTIONS

CURSOR_PREFIX = "cwa1t"
FETCH = 256  # rows read per query while a page fills


def traverse(conn: apsw.Connection, request: dict[str, Any], now: str) -> dict[str, Any]:
    secret = archive_secret(conn)
    project = request["project"]
    page = min(request.get("limit", limits.DEFAULT_TRAVERSE_PAGE), limits.MAX_TRAVERSE_PAGE)
    scan_limit = request.get("scanLimit", limits.DEFAULT_TRAVERSE_SCAN)
    max_tokens = request.get("maxTokens", limits.DEFAULT_TRAVERSE_TOKENS)
    start = _start(conn, request, project, secret)
    if isinstance(start, dict):
        return start
    session_row, position, direction, anchor = start

    records: list[Record] = []
    scanned, last, exhausted = 0, position, False
    while len(records) < page and scanned < scan_limit:
        batch = records_from(conn, session_row, last, direction, min(FETCH, scan_limit - scanned))
        if not batch:
            exhausted = True
            break
        for record in batch:
            scanned += 1
            last = record.position
            if record.readable:
                records.append(record)
                if len(records) == page:
                    break
            if scanned >= scan_limit:
                break
    if not exhausted and not records_from(conn, session_row, last, direction, 1):
        exhausted = True
    stop = "end" if exhausted else "page-full" if len(records) == page else "scan-limit"
    entries = [{"record": r, "direction": direction} for r in records]
    items = [packet.record_item(conn, entry, secret, packet.reach(max_tokens, len(entries))) for entry in entries]
    items, omitted, tokens = packet.fit("traverse", items, entries, max_tokens, now, secret)
    if omitted:  # the page's last records did not fit the budget: the cursor resumes at them
        last, exhausted, stop = records[len(items) - 1].position if items else position, False, "budget"
    rendered = render.packet("traverse", items, now)
    cursor = None if exhausted else sign_values(CURSOR_PREFIX, [project, session_row, direction, list(last)], secret)
    return {
        "status": "ok",
        "anchor": anchor,
        "direction": direction,
        "records": items,
        "omitted": omitted,
        "scanned": scanned,
        "stopReason": stop,
        "cursor": cursor,
        "rendered": rendered,
        "tokens": tokens,
    }


def _invalid(status: str, reason: str) -> dict[str, Any]:
    return {"status": status, "reason": reason, "records": [], "cursor": None, "scanned": 0}


def _start(conn: apsw.Connection, request: dict[str, Any], project: str, secret: bytes):
    """(session row, position, direction, anchor identity), or an answer with no records."""
    if request.get("cursor"):
        values = verify_values(CURSOR_PREFIX, request["cursor"], secret, 4)
        if values is None:
            return _invalid("cursor-invalid", "bad-signature")
        cursor_project, session_row, direction, position = values
        if cursor_project != project:
            return _invalid("cursor-invalid", "other-project")
        if direction not in DIRECTIONS or not isinstance(position, list) or len(position) != 3:
            return _invalid("cursor-invalid", "malformed")
        return session_row, tuple(position), direction, None
    direction = request.get("direction", "after")
    if request.get("locator"):
        locator = verify(request["locator"], secret)
        if locator is None:
            return _invalid("locator-invalid", "bad-signature")
        if locator.project != project:
            return _invalid("locator-invalid", "other-project")
        row = conn.execute(queries("search")["document_by_version"], (locator.documentId, locator.version)).fetchone()
        message = message_at(conn, row[0], locator.start) if row else None
        record = record_at(conn, row[0], message.ordinal) if message else None
    else:
        try:
            found = find_document(conn, request["documentId"], request.get("version"), project)
        except NotFound:  # another project's document included
            return _invalid("missing", "no-document")
        record = record_at(conn, found["row"], 0)
    if record is None:
        return _invalid("missing", "no-message")
    return record.session_row, record.position, direction, record.identity()
