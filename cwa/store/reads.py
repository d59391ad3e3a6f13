"""Direct reads (`get`): a document's text, messages and manifest, or a byte range of it.

A small document (source <= 1 MiB, serialized answer <= 8 MiB) comes back whole. A larger one
comes back as manifest coordinates (at most 256 chunk occurrences and 16 message keys) without
loading any chunk payload; its bytes are read by range, and a range read loads only the chunks
that intersect the range.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import apsw
import blake3
import orjson

from cwa import limits
from cwa.errors import Conflict, InvalidRequest, LimitExceeded, NotFound
from cwa.store.payloads import unpacked
from cwa.store.sqlfiles import queries
from cwa.vocabulary import GONE_STATES

_DOCUMENT_FIELDS = (
    "row",
    "documentId",
    "version",
    "project",
    "sessionId",
    "parentSessionId",
    "kind",
    "retentionClass",
    "createdAt",
    "admittedAt",
    "byteLength",
    "textDigest",
    "identityDigest",
    "sourceKeyCount",
    "firstSourceKey",
    "lastSourceKey",
    "subjectKey",
    "supersedesDocumentId",
    "supersedesVersion",
    "pinned",
    "state",
    "metadata",
    "generation",
    "projectRow",
    "supersededByDocumentId",
    "supersededByVersion",
)


def find_document(
    conn: apsw.Connection, document_id: str, version: int | None, project: str | None = None
) -> dict[str, Any]:
    """The document's row as a dict (latest version when `version` is None), or `not-found`.
    With `project` (a caller bound to one), another project's document is not found, with the
    very answer an id that never existed gets: the one place every method looks a named
    document up through."""
    row = conn.execute(queries("reads")["document_version"], (document_id, version, project)).fetchone()
    if row is None:
        what = document_id if version is None else f"{document_id} v{version}"
        where = "this archive" if project is None else "this project"
        raise NotFound(f"no document {what} in {where}", documentId=document_id, version=version)
    return dict(zip(_DOCUMENT_FIELDS, row))


def _header(doc: dict[str, Any], conn: apsw.Connection) -> dict[str, Any]:
    sql = queries("reads")
    outcomes = {handler: outcome for handler, outcome, _ in conn.execute(sql["outcomes"], (doc["row"],))}
    supersedes = (
        {"documentId": doc["supersedesDocumentId"], "version": doc["supersedesVersion"]}
        if doc["supersedesDocumentId"] is not None
        else None
    )
    return {
        "documentId": doc["documentId"],
        "version": doc["version"],
        "project": doc["project"],
        "sessionId": doc["sessionId"],
        "parentSessionId": doc["parentSessionId"],
        "kind": doc["kind"],
        "retentionClass": doc["retentionClass"],
        "createdAt": doc["createdAt"],
        "admittedAt": doc["admittedAt"],
        "state": doc["state"],
        "pinned": bool(doc["pinned"]),
        "subjectKey": doc["subjectKey"],
        "supersedes": supersedes,
        "supersededBy": (
            {"documentId": doc["supersededByDocumentId"], "version": doc["supersededByVersion"]}
            if doc["supersededByDocumentId"] is not None
            else None
        ),
        "byteLength": doc["byteLength"],
        "textDigest": doc["textDigest"],
        "identityDigest": doc["identityDigest"],
        "sourceKeys": {
            "first": doc["firstSourceKey"],
            "last": doc["lastSourceKey"],
            "count": doc["sourceKeyCount"],
        },
        "metadata": orjson.loads(doc["metadata"]) if doc["metadata"] is not None else None,
        "generation": doc["generation"],
        "indexOutcomes": outcomes,
    }


def _messages(conn: apsw.Connection, document_row: int, limit: int) -> list[dict[str, Any]]:
    return [
        {
            "key": key,
            "role": role,
            "toolName": tool_name,
            "toolCallId": tool_call_id,
            "timestamp": timestamp,
            "start": start,
            "textStart": text_start,
            "end": end,
        }
        for key, role, tool_name, tool_call_id, timestamp, start, text_start, end in conn.execute(
            queries("reads")["messages"], (document_row, limit)
        )
    ]


def _manifest(conn: apsw.Connection, document_row: int, limit: int) -> list[dict[str, Any]]:
    return [
        {"ordinal": ordinal, "start": start, "end": end, "hash": digest}
        for ordinal, start, end, digest in conn.execute(queries("reads")["chunk_manifest"], (document_row, limit))
    ]


def read_bytes(conn: apsw.Connection, document_row: int, start: int, end: int) -> tuple[bytes, int]:
    """Bytes [start, end) of a document and how many chunks were read to get them."""
    pieces, chunks_read = [], 0
    for chunk_start, chunk_end, chunk, byte_length, payload in conn.execute(
        queries("reads")["chunks_in_range"], (document_row, start, end)
    ):
        chunks_read += 1
        lo, hi = max(start, chunk_start) - chunk_start, min(end, chunk_end) - chunk_start
        pieces.append(unpacked(payload, byte_length, chunk)[lo:hi])
    return b"".join(pieces), chunks_read


def read_range(conn: apsw.Connection, doc: dict[str, Any], start: int, end: int) -> dict[str, Any]:
    """A byte range as text. A boundary inside a UTF-8 sequence moves outward to the character."""
    size = doc["byteLength"]
    if start > end or end > size:
        raise InvalidRequest(
            f"range [{start}, {end}) is not inside the document's {size} bytes",
            field="range",
            reason="out-of-range",
            byteLength=size,
        )
    if end - start > limits.GET_MAX_RANGE_BYTES:
        raise LimitExceeded(
            f"a range read returns at most {limits.GET_MAX_RANGE_BYTES} bytes",
            field="range",
            reason="range-too-large",
            limit=limits.GET_MAX_RANGE_BYTES,
            size=end - start,
        )
    # A UTF-8 sequence is at most 4 bytes: read 3 more on each side, then trim to characters.
    outer_start, outer_end = max(0, start - 3), min(size, end + 3)
    data, chunks_read = read_bytes(conn, doc["row"], outer_start, outer_end)
    lo, hi = start - outer_start, end - outer_start
    while 0 < lo < len(data) and (data[lo] & 0xC0) == 0x80:
        lo -= 1
    while hi < len(data) and (data[hi] & 0xC0) == 0x80:
        hi += 1
    return {
        "documentId": doc["documentId"],
        "version": doc["version"],
        "byteLength": size,
        "range": {"start": outer_start + lo, "end": outer_start + hi},
        "text": data[lo:hi].decode("utf-8"),
        "chunksRead": chunks_read,
    }


def checkpoint_parts(conn: apsw.Connection, metadata: str | None) -> dict[str, Any] | None:
    """A checkpoint root's original input as its parts, in order: `{bytes, blake3, parts:
    [{documentId, version, start, end}]}` where [start, end) is each part's text in its
    document (None: not a root, or a part is gone)."""
    manifest = (orjson.loads(metadata) if metadata else {}).get("checkpoint")
    if not manifest:
        return None
    parts = []
    for document_id, version, size in manifest["parts"]:
        row = conn.execute(queries("reads")["part_text_range"], (document_id, version)).fetchone()
        if row is None or row[2] - row[1] != size:
            return None
        parts.append({"documentId": document_id, "version": version, "start": row[1], "end": row[2]})
    return {"bytes": manifest["bytes"], "blake3": manifest["digest"], "parts": parts}


def read_checkpoint(conn: apsw.Connection, metadata: str | None) -> str | None:
    """The original text of a checkpoint root, from its parts' message text (None: not a root)."""
    manifest = (orjson.loads(metadata) if metadata else {}).get("checkpoint")
    if not manifest:
        return None
    sql = queries("reads")
    pieces = []
    for document_id, version, size in manifest["parts"]:
        row = conn.execute(sql["part_text_range"], (document_id, version)).fetchone()
        if row is None:
            return None
        document_row, start, end = row
        data, _ = read_bytes(conn, document_row, start, end)
        if len(data) != size:
            return None
        pieces.append(data.decode("utf-8"))
    text = "".join(pieces)
    return text if blake3.blake3(text.encode("utf-8")).hexdigest() == manifest["digest"] else None


def get_document(
    conn: apsw.Connection,
    document_id: str,
    version: int | None,
    byte_range: dict | None,
    project: str | None = None,
) -> dict[str, Any]:
    doc = find_document(conn, document_id, version, project)
    if doc["state"] in GONE_STATES:  # expired or redacted: the header stays, the bytes do not
        if byte_range is not None:
            raise Conflict(
                f"{document_id} v{doc['version']} is {doc['state']}: its text is no longer readable",
                documentId=document_id,
                version=doc["version"],
                reason=doc["state"],
            )
        return {**_header(doc, conn), "complete": False, "available": False}
    if byte_range is not None:
        return read_range(conn, doc, byte_range["start"], byte_range["end"])
    result = _header(doc, conn)
    if doc["kind"] == "checkpoint-root":
        parts = checkpoint_parts(conn, doc["metadata"])
        if parts is not None and parts["bytes"] > limits.GET_MAX_RESULT_BYTES:
            # Too large to answer inline: the parts, in order, to read by ranges (`cwa get --text`
            # streams them); never the root's own preview as if it were the input.
            return {**result, "complete": False, "checkpoint": parts}
        original = read_checkpoint(conn, doc["metadata"]) if parts is not None else None
        if original is not None:
            return {**result, "complete": True, "text": original, "checkpoint": True}
    if doc["byteLength"] <= limits.GET_INLINE_SOURCE_BYTES:
        data, _ = read_bytes(conn, doc["row"], 0, doc["byteLength"])
        result.update(
            complete=True,
            text=data.decode("utf-8"),
            messages=_messages(conn, doc["row"], limits.MAX_SOURCE_MESSAGES),
            manifest={"chunks": _manifest(conn, doc["row"], -1)},
        )
        if len(orjson.dumps(result)) <= limits.GET_MAX_RESULT_BYTES:
            return result
        result = _header(doc, conn)
    chunk_count = conn.execute(queries("reads")["chunk_count"], (doc["row"],)).fetchone()[0]
    result.update(
        complete=False,
        messages=_messages(conn, doc["row"], limits.GET_MANIFEST_MESSAGES),
        manifest={
            "chunks": _manifest(conn, doc["row"], limits.GET_MANIFEST_CHUNKS),
            "chunkCount": chunk_count,
            "messageCount": doc["sourceKeyCount"],
        },
    )
    return result


class MessageRow(NamedTuple):
    """Where one message lies in its document's bytes."""

    ordinal: int
    key: str
    role: str
    start: int  # its header line
    text_start: int  # its text
    end: int


def document_messages(conn: apsw.Connection, document_row: int) -> list[MessageRow]:
    return [MessageRow(*row) for row in conn.execute(queries("reads")["all_messages"], (document_row,))]


def message_at(conn: apsw.Connection, document_row: int, position: int) -> MessageRow | None:
    """The message whose bytes (header line included) hold byte `position`."""
    row = conn.execute(queries("reads")["message_at"], (document_row, position)).fetchone()
    return MessageRow(*row) if row else None


def message_by_ordinal(conn: apsw.Connection, document_row: int, ordinal: int) -> MessageRow | None:
    row = conn.execute(queries("reads")["message_by_ordinal"], (document_row, ordinal)).fetchone()
    return MessageRow(*row) if row else None


def window_text(conn: apsw.Connection, document_row: int, start: int, end: int, first: int, last: int) -> str:
    """The message text inside a window without the serialized header lines: exactly what the
    lexical index saw (and what the semantic index embeds)."""
    data, _ = read_bytes(conn, document_row, start, end)
    pieces = []
    for row in conn.execute(queries("reads")["messages_between"], (document_row, first, last)):
        message = MessageRow(*row)
        lo, hi = max(start, message.text_start), min(end, message.end)
        if hi > lo:
            pieces.append(data[lo - start : hi - start].decode("utf-8"))
    return "\n\n".join(pieces)
