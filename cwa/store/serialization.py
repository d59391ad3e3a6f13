"""The deterministic text of a document, and the identity of an admission.

A document's text is its messages in order, each as a header line and its text, separated by a
blank line:

    [user at=2026-11-29T10:00:00.000Z]
    Why does the retry loop spin?

    [toolResult tool=bash call=call_7]
    src/retry.py:42: RetryError ...

Message byte coordinates point into that text. A message without a key gets one derived from its
role, timestamp, tool call id and the blake3 of its serialized block, so the same message gets
the same key in every document and every archive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import blake3
import orjson

from cwa.errors import InvalidRequest

MESSAGE_SEPARATOR = b"\n\n"
_PLAIN_LABEL = re.compile(r"[A-Za-z0-9_.:/@+-]{1,200}")


@dataclass(frozen=True)
class SerializedMessage:
    key: str
    role: str
    tool_name: str | None
    tool_call_id: str | None
    timestamp: str | None
    start: int  # header start
    text_start: int
    end: int  # text end


@dataclass(frozen=True)
class SerializedDocument:
    text: bytes
    messages: tuple[SerializedMessage, ...]


def _label(value: str) -> str:
    return value if _PLAIN_LABEL.fullmatch(value) else orjson.dumps(value).decode()


def message_header(message: dict[str, Any]) -> str:
    parts = [message["role"]]
    if message.get("toolName") is not None:
        parts.append(f"tool={_label(message['toolName'])}")
    if message.get("toolCallId") is not None:
        parts.append(f"call={_label(message['toolCallId'])}")
    if message.get("timestamp") is not None:
        parts.append(f"at={message['timestamp']}")
    return "[" + " ".join(parts) + "]\n"


def derive_message_key(message: dict[str, Any], block: bytes) -> str:
    # blake3 of role, timestamp and tool call id (each ended by \x1f), then the block: one call
    prefix = f"{message['role']}\x1f{message.get('timestamp') or ''}\x1f{message.get('toolCallId') or ''}\x1f"
    return "k-" + blake3.blake3(prefix.encode("utf-8") + block).hexdigest()[:32]


def serialize_messages(messages: list[dict[str, Any]]) -> SerializedDocument:
    """Serialize validated messages; explicit keys must be unique within the document."""
    explicit = [m["key"] for m in messages if m.get("key") is not None]
    if len(set(explicit)) != len(explicit):
        duplicate = next(k for k in explicit if explicit.count(k) > 1)
        raise InvalidRequest(
            f"message key {duplicate!r} appears twice in one document",
            field="messages",
            reason="duplicate-key",
        )
    taken = set(explicit)
    pieces: list[bytes] = []
    coordinates: list[SerializedMessage] = []
    offset = 0
    for message in messages:
        if pieces:
            pieces.append(MESSAGE_SEPARATOR)
            offset += len(MESSAGE_SEPARATOR)
        header = message_header(message).encode("utf-8")
        body = message["text"].encode("utf-8")
        key = message.get("key")
        if key is None:
            base = derive_message_key(message, header + body)
            key, repeat = base, 1
            while key in taken:  # the same unkeyed message twice in one document
                repeat += 1
                key = f"{base}-{repeat}"
            taken.add(key)
        coordinates.append(
            SerializedMessage(
                key=key,
                role=message["role"],
                tool_name=message.get("toolName"),
                tool_call_id=message.get("toolCallId"),
                timestamp=message.get("timestamp"),
                start=offset,
                text_start=offset + len(header),
                end=offset + len(header) + len(body),
            )
        )
        pieces.append(header)
        pieces.append(body)
        offset += len(header) + len(body)
    return SerializedDocument(b"".join(pieces), tuple(coordinates))


def identity_digest(
    request: dict[str, Any], document: SerializedDocument, created_explicit: bool, text_digest: bytes
) -> str:
    """blake3 of the canonical manifest: what makes two admissions the same document.
    `text_digest` is the blake3 of `document.text` (admission stores it too).

    A defaulted createdAt is left out, so a retry of the same input an instant later is still
    the same document; an explicit one is part of the identity.
    """
    manifest = {
        "v": 1,
        "project": request["project"],
        "sessionId": request["sessionId"],
        "kind": request["kind"],
        "retentionClass": request["retentionClass"],
        "createdAt": request["createdAt"] if created_explicit else None,
        "subjectKey": request.get("subjectKey"),
        "supersedes": request.get("supersedes"),
        "metadata": request.get("metadata"),
        "textDigest": text_digest.hex(),
        "messages": [
            [m.key, m.role, m.tool_name, m.tool_call_id, m.timestamp, m.start, m.end] for m in document.messages
        ],
    }
    return blake3.blake3(orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS)).hexdigest()
