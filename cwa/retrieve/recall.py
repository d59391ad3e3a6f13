"""Recall: a signed locator (or a document id) back to exact archived bytes.

Statuses: `resolved`, `expired`, `superseded`, `missing`, `locator-invalid`, `lease-expired`.
A tampered, foreign-project or out-of-scope locator never yields bytes; a superseded version is
never silently replaced by its successor. Only the chunks intersecting the chosen byte range are
read.

What is materialized, within `maxTokens` (a hard bound under cwa.tokens):
- a turn or decision whose source is at most 64 KiB and fits: the whole document;
- a structural hit: the exact message;
- an exact hit: the message holding the anchor;
- a window (lexical hit, tool output): the window and up to `neighbors` windows each side that
  fit, with the header line of the message it sits in when it starts mid-message;
- a direct document id: the whole source when it fits, otherwise a table of contents.
Evidence that does not fit is offered through continuation locators.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import apsw

from cwa import limits
from cwa.errors import NotFound
from cwa.retrieve.locators import Locator, sign, verify
from cwa.retrieve.summary import document_summary
from cwa.store import recall_feedback
from cwa.store.leases import lease_active
from cwa.store.reads import document_messages, find_document, message_at, read_bytes
from cwa.store.secret import archive_secret
from cwa.store.sqlfiles import queries
from cwa.timestamps import age_days
from cwa.tokens import estimate_tokens, fit_around

COMPLETE_TURN_BYTES = 64 * 1024


def recall(conn: apsw.Connection, request: dict[str, Any], now: str) -> dict[str, Any]:
    max_tokens = request.get("maxTokens", limits.DEFAULT_RECALL_TOKENS)
    neighbors = request.get("neighbors", limits.DEFAULT_RECALL_NEIGHBORS)
    if "locator" in request:
        return _recall_locator(conn, request, now, max_tokens, neighbors)
    return _recall_document(conn, request, now, max_tokens)


def _status(status: str, **extra: Any) -> dict[str, Any]:
    return {"status": status, **extra}


def _recall_locator(conn, request, now, max_tokens, neighbors) -> dict[str, Any]:
    sql = queries("search")
    secret = archive_secret(conn)
    locator = verify(request["locator"], secret)
    if locator is None:
        return _status("locator-invalid", reason="bad-signature")
    if request.get("project") is not None and request["project"] != locator.project:
        return _status("locator-invalid", reason="other-project")
    sessions = request.get("sessionIds")
    if sessions is not None and locator.scope == "session" and locator.session not in sessions:
        return _status("locator-invalid", reason="out-of-scope")
    row = conn.execute(sql["document_by_version"], (locator.documentId, locator.version)).fetchone()
    if row is None:
        return _status("missing", documentId=locator.documentId, version=locator.version)
    doc = document_summary(conn, row[0])
    problem = _state_problem(conn, doc)
    if problem:
        return problem
    if locator.lease is not None and not lease_active(conn, locator.lease, now):
        return _status(
            "lease-expired",
            documentId=doc["documentId"],
            version=doc["version"],
            reason="search again, or recall by documentId",
        )
    result = _materialize(conn, doc, locator, now, max_tokens, neighbors, secret)
    recall_feedback.record(conn, doc["row"], now, locator.lease)  # the importance prior counts it
    return result


def _recall_document(conn, request, now, max_tokens) -> dict[str, Any]:
    try:
        found = find_document(conn, request["documentId"], request.get("version"), request.get("project"))
    except NotFound:  # another project's document included: it is not there for this caller
        return _status("missing", documentId=request["documentId"], version=request.get("version"))
    doc = document_summary(conn, found["row"])
    problem = _state_problem(conn, doc)
    if problem:
        return problem
    messages = document_messages(conn, doc["row"])
    if doc["byteLength"] <= COMPLETE_TURN_BYTES:
        data, reads = read_bytes(conn, doc["row"], 0, doc["byteLength"])
        text = data.decode("utf-8")
        if estimate_tokens(text) <= max_tokens:
            return _resolved(conn, doc, messages, now, 0, doc["byteLength"], text, reads, "complete-source")
    toc = [
        {"ordinal": o, "start": s, "end": e} for o, s, e in conn.execute(queries("search")["chunk_toc"], (doc["row"],))
    ]
    result = _resolved(conn, doc, messages, now, 0, 0, "", 0, "table-of-contents")
    result["tableOfContents"] = {
        "chunks": toc[:256],
        "chunkCount": len(toc),
        "messages": [{"key": m.key, "role": m.role, "start": m.start, "end": m.end} for m in messages[:256]],
    }
    return result


def _state_problem(conn: apsw.Connection, doc: dict[str, Any]) -> dict[str, Any] | None:
    if doc["state"] == "live":
        return None
    base = {"documentId": doc["documentId"], "version": doc["version"]}
    if doc["state"] == "superseded":
        replacement = conn.execute(queries("search")["replacement_of"], (doc["row"],)).fetchone()
        return _status(
            "superseded",
            **base,
            replacement={"documentId": replacement[0], "version": replacement[1]} if replacement else None,
        )
    if doc["state"] == "expired":
        return _status("expired", **base)
    return _status("missing", **base, reason=doc["state"])


def _materialize(conn, doc, locator: Locator, now, max_tokens, neighbors, secret) -> dict[str, Any]:
    sql = queries("search")
    messages = document_messages(conn, doc["row"])
    if doc["kind"] in ("turn", "decision") and doc["byteLength"] <= COMPLETE_TURN_BYTES:
        data, reads = read_bytes(conn, doc["row"], 0, doc["byteLength"])
        text = data.decode("utf-8")
        if estimate_tokens(text) <= max_tokens:
            return _resolved(conn, doc, messages, now, 0, doc["byteLength"], text, reads, "complete-turn")

    header = ""
    if locator.unit == "message" and locator.message is not None and locator.message < len(messages):
        message = messages[locator.message]
        spans, unit = [(None, message.start, message.end)], "message"
    elif locator.unit == "window" and locator.window is not None:
        spans = [
            (o, s, e)
            for o, s, e in conn.execute(
                sql["windows_around"], (doc["row"], locator.window - neighbors, locator.window + neighbors)
            )
        ]
        if not any(o == locator.window for o, _, _ in spans):  # indexes changed since the search
            spans = [(None, locator.start, locator.end)]
        unit = "window"
    elif locator.unit == "anchor":
        holder = message_at(conn, doc["row"], locator.start)
        spans = [(None, holder.start, holder.end)] if holder else [(None, locator.start, locator.end)]
        unit = "message"
    else:
        spans, unit = [(None, locator.start, locator.end)], "range"

    # Keep the hit's own span, then add neighbours nearest first while they fit.
    hit = next(i for i, (o, _, _) in enumerate(spans) if o is None or o == locator.window)
    first = last = hit
    holder = message_at(conn, doc["row"], spans[hit][1])
    header_reads = 0
    if holder and holder.start < spans[hit][1] and unit == "window":
        data, header_reads = read_bytes(conn, doc["row"], holder.start, holder.text_start)
        header = data.decode("utf-8")
    if estimate_tokens(header) > max_tokens // 2:
        header = ""  # the evidence itself matters more than its label
    budget = max_tokens - estimate_tokens(header)
    start, end = spans[hit][1], spans[hit][2]
    data, reads = read_bytes(conn, doc["row"], start, end)
    reads += header_reads
    text = data.decode("utf-8")
    truncated = False
    if estimate_tokens(text) > budget:
        # Too long even alone: keep the part around the match itself.
        focus = len(data[: max(0, locator.start - start)].decode("utf-8", errors="ignore"))
        left, right = fit_around(text, budget, focus)
        start += len(text[:left].encode("utf-8"))
        end = start + len(text[left:right].encode("utf-8"))
        text, truncated = text[left:right], True
    else:
        for step in range(1, len(spans)):
            grew = False
            for index in (hit - step, hit + step):
                if not 0 <= index < len(spans):
                    continue
                _, s, e = spans[index]
                piece, piece_reads = read_bytes(conn, doc["row"], s, e)
                candidate = (piece.decode("utf-8") + text) if index < hit else (text + piece.decode("utf-8"))
                if estimate_tokens(candidate) <= budget:
                    text, reads = candidate, reads + piece_reads
                    start, end = (s, end) if index < hit else (start, e)
                    first, last = min(first, index), max(last, index)
                    grew = True
            if not grew:
                break
    result = _resolved(conn, doc, messages, now, start, end, text, reads, unit)
    result["header"] = header
    result["truncated"] = truncated
    base = replace(locator, unit="range", window=None, message=None)
    continuation: dict[str, str] = {}
    if truncated:
        if start > spans[hit][1]:
            continuation["before"] = sign(replace(base, start=spans[hit][1], end=start), secret)
        if end < spans[hit][2]:
            continuation["after"] = sign(replace(base, start=end, end=spans[hit][2]), secret)
    elif unit == "window" and spans[first][0] is not None:
        # The windows just outside what was returned, whether or not they were fetched.
        for side, ordinal in (("before", spans[first][0] - 1), ("after", spans[last][0] + 1)):
            found = conn.execute(sql["windows_around"], (doc["row"], ordinal, ordinal)).fetchone()
            if found:
                continuation[side] = sign(replace(base, start=found[1], end=found[2]), secret)
    result["continuation"] = continuation
    return result


def _resolved(conn, doc, messages, now, start, end, text, reads, materialization) -> dict[str, Any]:
    age = max(0.0, age_days(doc["createdAt"], now))
    chunks = [
        {"ordinal": o, "start": s, "end": e}
        for o, s, e in conn.execute(queries("search")["chunks_intersecting"], (doc["row"], start, end))
    ]
    return {
        "status": "resolved",
        "documentId": doc["documentId"],
        "version": doc["version"],
        "kind": doc["kind"],
        "project": doc["project"],
        "sessionId": doc["sessionId"],
        "createdAt": doc["createdAt"],
        "sourceKeys": [m.key for m in messages],
        "range": {"start": start, "end": end},
        "byteLength": doc["byteLength"],
        "materialization": materialization,
        "text": text,
        "tokens": estimate_tokens(text),
        "chunks": chunks,  # coordinates of the chunks holding the returned range
        "chunksRead": reads,
        "historical": True,
        "staleness": f"historical: archived {doc['createdAt'][:10]}, {age:.0f} days ago; may be out of date",
    }
