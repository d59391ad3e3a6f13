"""Admission: turning a validated `admit` request into canonical rows, idempotently.

Everything that can be computed without the database (serialization, keys, digests, chunk
hashes) happens before the write lock is taken. A retry of identical input is answered from a
read and writes nothing. Otherwise one IMMEDIATE transaction inserts the project, session,
chunks, document, chunk ranges and message coordinates, marks a superseded document, and runs
the derived-index handlers the caller composed (each in its own savepoint, see cwa/store/derived.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import apsw
import blake3
import orjson

from cwa import limits
from cwa.errors import Conflict, InvalidRequest, LimitExceeded, NotFound
from cwa.store import checkpoint_parts, index_queue, retention
from cwa.store.chunking import chunk_spans
from cwa.store.connection import write_transaction
from cwa.store.derived import IndexHandler, IndexTarget, prepare_handlers, run_handlers
from cwa.store.payloads import packed
from cwa.store.reads import find_document
from cwa.store.serialization import SerializedDocument, identity_digest, serialize_messages
from cwa.store.sessions import ensure_project, ensure_session
from cwa.store.sqlfiles import queries
from cwa.store.supersession import check_supersession, link, retire
from cwa.vocabulary import DEFAULT_CLASS_FOR_KIND

DOCUMENT_ID_PREFIX = "doc-"
DOCUMENT_ID_DIGITS = 20  # hex digits of the identity digest in an id the archive makes
_DOCUMENT_ID = re.compile(DOCUMENT_ID_PREFIX + f"[0-9a-f]{{{DOCUMENT_ID_DIGITS}}}(?![0-9a-f])")


def document_ids_in(text: str) -> list[str]:
    """The document ids the archive could have made that `text` names (a preview, a marker, a
    catalog, search results an agent read)."""
    return _DOCUMENT_ID.findall(text) if DOCUMENT_ID_PREFIX in text else []


def admit(
    conn: apsw.Connection,
    request: dict[str, Any],
    *,
    handlers: Sequence[IndexHandler],
    now: str,
    retention_plan: dict[str, int] | None = None,
    deferred: bool = False,
    deflate: bool = False,
) -> dict[str, Any]:
    """Admit one validated request; see docs/contract.md for the response. With a retention plan
    (days per class, cwa/store/retention.py) the new document's expiry is scheduled in the same
    transaction. `deferred`: the derived rows wait in the index queue (cwa/store/index_queue.py)
    instead of being made in this transaction; the response has `indexPending: true`. A deferred
    document's chunks are stored as their bytes, for the queue to deflate, unless `deflate` (a
    bulk writer, whom no request waits for: each chunk is then written once, deflated)."""
    sql = queries("admission")
    request = dict(request)
    created_explicit = "createdAt" in request
    request.setdefault("retentionClass", DEFAULT_CLASS_FOR_KIND[request["kind"]])
    request.setdefault("createdAt", now)
    if request.get("parentSessionId") == request["sessionId"]:
        raise InvalidRequest(
            "parentSessionId names the session itself",
            field="parentSessionId",
            reason="self-parent",
        )

    document = _serialize_within_limit(request["messages"])
    text_digest = blake3.blake3(document.text).digest()  # hashed once: the manifest names it too
    identity = identity_digest(request, document, created_explicit, text_digest)
    identity_key = bytes.fromhex(identity)  # stored as its 32 bytes, as every digest
    existing = conn.execute(sql["find_by_identity"], {"identity": identity_key}).fetchone()
    if existing:
        response = _existing_response(conn, existing)
        if request["kind"] == "checkpoint-root":  # a retry completes what a killed process left
            response["pendingParts"] = _root_parts(conn, handlers, now, existing[0], deferred)
        return response

    spans = chunk_spans(document.text)
    pieces = [document.text[start:end] for start, end in spans]
    hashes = [blake3.blake3(piece).digest() for piece in pieces]
    metadata = request.get("metadata")
    part = request["kind"] == "checkpoint-part"
    indexed_now = not part and not deferred
    queued = deferred and not part
    # Deflated before the lock (cwa/store/payloads.py); a queued document's bytes are stored as they
    # are and the index queue deflates them with its derived rows, off the request that waits here
    # (unless `deflate`: rewriting them deflated leaves the chunk pages underfilled).
    stored = pieces if queued and not deflate else [packed(piece) for piece in pieces]
    prepared = prepare_handlers(handlers, request["kind"], document) if indexed_now else {}  # before the lock

    with write_transaction(conn):
        existing = conn.execute(sql["find_by_identity"], {"identity": identity_key}).fetchone()
        if existing:  # another process admitted it while we waited for the lock
            return _existing_response(conn, existing)
        project_id = ensure_project(conn, request["project"], now)
        session_row = ensure_session(conn, project_id, request["sessionId"], request.get("parentSessionId"), now)
        supersedes_row, document_id, version = _resolve_identity_and_supersession(conn, request, project_id, identity)
        generation_id = None  # a deferred document gets its generation when the index queue reaches it
        if indexed_now:
            conn.execute(sql["insert_generation"], ("admit", now))
            generation_id = conn.last_insert_rowid()

        chunk_ids = [
            _stored_chunk(conn, digest, len(piece), payload) for digest, piece, payload in zip(hashes, pieces, stored)
        ]

        if supersedes_row is not None:  # first, so the subject key is free for the replacement
            retire(conn, supersedes_row, now)
        conn.execute(
            sql["insert_document"],
            {
                "document_id": document_id,
                "version": version,
                "project_id": project_id,
                "session_id": session_row,
                "kind": request["kind"],
                "retention_class": request["retentionClass"],
                "created_at": request["createdAt"],
                "admitted_at": now,
                "byte_length": len(document.text),
                # a one-chunk document's digest is its chunk's hash, stored there: x'' here
                # (the `document_digests` view gives every document's, sql/views.sql)
                "text_digest": b"" if len(hashes) == 1 else text_digest,
                "identity_digest": identity_key,
                "source_key_count": len(document.messages),
                "subject_key": request.get("subjectKey"),
                "supersedes_row": supersedes_row,
                "metadata": orjson.dumps(metadata, option=orjson.OPT_SORT_KEYS).decode()
                if metadata is not None
                else None,
                # a checkpoint part gets derived rows only once its root commits (checkpoint_parts.py),
                # a deferred document once the index queue reaches it
                "index_generation": generation_id,
            },
        )
        document_row = conn.last_insert_rowid()
        if supersedes_row is not None:
            link(conn, supersedes_row, document_row, now)
        conn.executemany(
            sql["insert_document_chunk"],
            [
                (document_row, ordinal, chunk_id, start, end)
                for ordinal, (chunk_id, (start, end)) in enumerate(zip(chunk_ids, spans))
            ],
        )
        conn.executemany(
            sql["insert_message"],
            [
                (
                    document_row,
                    ordinal,
                    m.key,
                    m.role,
                    m.tool_name,
                    m.tool_call_id,
                    m.timestamp,
                    m.start,
                    m.text_start,
                    m.end,
                )
                for ordinal, m in enumerate(document.messages)
            ],
        )
        if retention_plan is not None:
            retention.schedule(conn, document_row, request["retentionClass"], retention_plan, new=True)
            retention.adopt_plan_if_unset(conn, retention_plan)
        outcomes = (
            run_handlers(
                conn,
                handlers,
                generation_id,
                IndexTarget(document_row, request["kind"], document, prepared, text_digest),
            )
            if indexed_now
            else {}
        )
        if queued:
            index_queue.enqueue(conn, document_row, project_id, now)
        if request["kind"] == "checkpoint-root":
            checkpoint_parts.link_parts(conn, document_row, metadata)
        if generation_id is not None:
            conn.execute(sql["finish_generation"], (now, generation_id))
    response = {
        "documentId": document_id,
        "version": version,
        "created": True,
        "generation": generation_id,
        "indexOutcomes": outcomes,
        "messageKeys": [m.key for m in document.messages],
    }
    if queued:
        response["indexPending"] = True
    if request["kind"] == "checkpoint-root":  # its parts become findable now, one transaction each
        response["pendingParts"] = _root_parts(conn, handlers, now, document_row, deferred)
    return response


def _root_parts(conn: apsw.Connection, handlers: Sequence[IndexHandler], now: str, root: int, deferred: bool) -> int:
    """A committed root's parts still without derived rows, after indexing them now (unless
    deferred: then the index queue's drain indexes them with the root)."""
    if deferred:
        return checkpoint_parts.unindexed_parts(conn, root)
    return checkpoint_parts.index_root_parts(conn, handlers, now, root)


def _serialize_within_limit(messages: list[dict[str, Any]]) -> SerializedDocument:
    # Characters never outnumber UTF-8 bytes, so this rejects the hopeless cases before encoding.
    if sum(len(m["text"]) for m in messages) > limits.MAX_DOCUMENT_BYTES:
        # the texts alone are too large: their bytes are the size (headers would only add)
        raise _too_large(sum(len(m["text"].encode("utf-8")) for m in messages))
    document = serialize_messages(messages)
    if len(document.text) > limits.MAX_DOCUMENT_BYTES:
        raise _too_large(len(document.text))
    return document


def _too_large(size: int) -> LimitExceeded:
    return LimitExceeded(
        f"the document text is {size:,} bytes or more; the limit is {limits.MAX_DOCUMENT_BYTES:,}",
        field="messages",
        reason="document-too-large",
        limit=limits.MAX_DOCUMENT_BYTES,
        size=size,
    )


def _existing_response(conn: apsw.Connection, row: tuple) -> dict[str, Any]:
    sql = queries("admission")
    document_row, document_id, version, generation = row
    outcomes = {h: o for h, o, _ in conn.execute(queries("reads")["outcomes"], (document_row,))}
    keys = [r[0] for r in conn.execute(sql["message_keys"], (document_row,))]
    return {
        "documentId": document_id,
        "version": version,
        "created": False,
        "generation": generation,
        "indexOutcomes": outcomes,
        "messageKeys": keys,
    }


def _resolve_identity_and_supersession(
    conn: apsw.Connection, request: dict[str, Any], project_id: int, identity: str
) -> tuple[int | None, str, int]:
    """Return (superseded row, documentId, version) after checking supersession and subject keys.

    A replacement that keeps the superseded document's subject key becomes its next version;
    any other document gets a new id, derived from its identity digest, at version 1.
    """
    sql = queries("admission")
    subject = request.get("subjectKey")
    target = request.get("supersedes")
    old = None
    if target is not None:
        try:
            old = find_document(conn, target["documentId"], target["version"], request["project"])
        except NotFound as exc:
            exc.details["field"] = "supersedes"
            raise
        check_supersession(conn, old, project_id, request["createdAt"], None)
    if subject is not None:
        holder = conn.execute(sql["find_live_subject"], (project_id, subject)).fetchone()
        if holder is not None and (old is None or holder[0] != old["row"]):
            raise Conflict(
                f"subject key {subject!r} is held by {holder[1]} v{holder[2]}; name it in supersedes to replace it",
                field="subjectKey",
                reason="subject-held",
                documentId=holder[1],
                version=holder[2],
            )
    if old is not None and subject is not None and old["subjectKey"] == subject:
        return old["row"], old["documentId"], old["version"] + 1
    document_id = DOCUMENT_ID_PREFIX + identity[:DOCUMENT_ID_DIGITS]
    # an id whose earlier version gave up its identity (an expired orphan checkpoint part) goes on
    # at the next version
    taken = conn.execute(sql["latest_version_of"], (document_id,)).fetchone()[0]
    return (old["row"] if old is not None else None), document_id, (taken or 0) + 1


def _stored_chunk(conn: apsw.Connection, digest: bytes, length: int, payload: bytes) -> int:
    """The row of the chunk whose bytes have blake3 `digest`: the stored one, else a new one
    holding `payload` (those `length` bytes as cwa/store/payloads.py stores them).
    Inside admission's write transaction, so no other process stores it between the two."""
    sql = queries("admission")
    found = conn.execute(sql["chunk_id"], {"hash": digest}).fetchone()
    if found is not None:
        return found[0]
    conn.execute(sql["insert_chunk"], {"hash": digest, "length": length, "data": payload})
    return conn.last_insert_rowid()
