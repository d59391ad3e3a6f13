"""Interaction groups leave the live context as `turn` documents, and tool output as `tool-result`.

A group becomes one turn document, or several when it holds more than the admission limits allow
(MAX_SOURCE_MESSAGES messages, TURN_PART_BYTES of text): consecutive parts in order, each naming
its place in `metadata.turnGroup`, every message under its own transcript key. A message whose
text alone exceeds TURN_PART_BYTES is archived exactly as a checkpoint, and the turn holds its
preview. The text a turn stores for an externalized message is what the provider saw (its
preview names the archived source), so no output is indexed twice.

Every admission is idempotent: the same group archived again returns the same ids.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import blake3

from cwa import limits
from cwa.session.checkpoint import archive_checkpoint, catalog_entry
from cwa.session.transcript import Entry, shown_text
from cwa.store.admission import admit
from cwa.store.disk_guard import check_free_space
from cwa.store.retention import plan_of
from cwa.store.serialization import serialize_messages
from cwa.store.session_state import load_replacements

TURN_PART_BYTES = 4 * limits.MIB
HEADER_BYTES = 256  # a generous bound of one message's header line and separator
CATALOG_HEAD_CHARS = 2_000
CATALOG_TAIL_CHARS = 1_000

Admit = Callable[[dict[str, Any]], dict[str, Any]]


def admitter(host: Any, defer: bool = True) -> Admit:
    """Admission into the host's archive straight through the store, as `admit` does after its
    contract check: the session engine's requests are built from transcript entries already
    checked, so they need none. The disk guard and the retention schedule still apply. Where the
    host has an index worker (`cwa serve`, the hook server) and `defer`, the derived rows wait for
    it (cwa/store/index_queue.py)."""

    def admit_document(request: dict[str, Any]) -> dict[str, Any]:
        check_free_space(host.path, host.settings["diskCriticalMebibytes"])
        deferred = defer and host.index_worker is not None
        admitted = admit(
            host.conn,
            request,
            handlers=host.handlers,
            now=host.clock(),
            retention_plan=plan_of(host.settings),
            deferred=deferred,
            deflate=deferred and host.index_worker.deflate_on_admission,
        )
        if deferred:
            host.index_worker.wake()
        return admitted

    return admit_document


def decided_texts(conn: Any, lineage: list[int], entries: list[Entry]) -> dict[str, str]:
    """What the provider saw of the messages an engine of the lineage replaced (their sources are
    archived): the text a turn document stores for them, so no output is indexed twice."""
    decided = load_replacements(conn, lineage, [e.key for e in entries])
    return {
        e.key: shown_text(e, decided[e.key].text)
        for e in entries
        if e.key in decided and decided[e.key].text is not None
    }


def _created(entries: list[Entry]) -> dict[str, str]:
    stamp = next((e.timestamp for e in entries if e.timestamp), None)
    return {"createdAt": stamp} if stamp else {}


def _split(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    parts: list[list[dict[str, Any]]] = [[]]
    size = 0
    for message in messages:
        cost = len(message["text"].encode("utf-8")) + HEADER_BYTES
        if parts[-1] and (len(parts[-1]) >= limits.MAX_SOURCE_MESSAGES or size + cost > TURN_PART_BYTES):
            parts.append([])
            size = 0
        parts[-1].append(message)
        size += cost
    return parts


def archive_group(
    admit: Admit,
    scope: dict[str, str],
    group: list[Entry],
    shown: dict[str, str],
    supersedes: dict[str, Any] | None = None,
    describe: bool = False,
) -> list[dict[str, Any]]:
    """Admit one interaction group as turn document(s); `shown` maps the keys of externalized
    messages to the text the provider saw. A group that grew since it was archived as one
    document `supersedes` that document (when it is still one document). Returns, per document
    in order, its id and version, and with `describe` its catalog entry (terms, hash: work only a
    compaction needs, not rotation or settling)."""
    messages = []
    for entry in group:
        text = shown.get(entry.key, entry.text)
        if len(text.encode("utf-8")) > TURN_PART_BYTES:
            text = archive_checkpoint(admit, scope["project"], scope["sessionId"], text, entry.timestamp)["preview"]
        messages.append(entry.admission(text))
    parts = _split(messages)
    by_key = {e.key: e for e in group}
    documents = []
    for number, part in enumerate(parts, 1):
        request: dict[str, Any] = {
            **scope,
            "kind": "turn",
            "messages": part,
            **_created([by_key[m["key"]] for m in part]),
        }
        if len(parts) > 1:
            request["metadata"] = {"turnGroup": {"key": group[0].key, "part": number, "parts": len(parts)}}
        elif supersedes is not None:
            request["supersedes"] = supersedes
        admitted = admit(request)
        documents.append(
            _entry(admitted, part, [by_key[m["key"]] for m in part])
            if describe
            else {"rootId": admitted["documentId"], "version": admitted["version"]}
        )
    return documents


def _entry(admitted: dict[str, Any], part: list[dict[str, Any]], entries: list[Entry]) -> dict[str, Any]:
    """A catalog entry of one turn document: topic and terms from its head and tail only."""
    text = "\n\n".join(m["text"] for m in part)
    data = serialize_messages(part).text  # bytes and hash of the archived document, as `get` returns it
    head, tail = text[:CATALOG_HEAD_CHARS], text[-CATALOG_TAIL_CHARS:] if len(text) > CATALOG_HEAD_CHARS else ""
    stamps = [e.timestamp for e in entries if e.timestamp]
    return {
        "rootId": admitted["documentId"],
        "version": admitted["version"],
        "kind": "turn",
        "firstKey": entries[0].key,
        "lastKey": entries[-1].key,
        "messages": len(entries),
        "from": stamps[0] if stamps else None,
        "to": stamps[-1] if stamps else None,
        **catalog_entry(head, tail, len(data), blake3.blake3(data).hexdigest()),
    }


def archive_tool_result(admit: Admit, scope: dict[str, str], entry: Entry, text: str | None = None) -> tuple[str, int]:
    """Archive one tool output exactly (`text`: the message's text and the parts its preview
    leaves out; default its text): (document id, version); a checkpoint root beyond the size limit."""
    text = entry.text if text is None else text
    if len(text.encode("utf-8")) > TURN_PART_BYTES:
        root = archive_checkpoint(admit, scope["project"], scope["sessionId"], text, entry.timestamp)
        return root["rootId"], root["version"]
    admitted = admit({**scope, "kind": "tool-result", "messages": [entry.admission(text)], **_created([entry])})
    return admitted["documentId"], admitted["version"]
