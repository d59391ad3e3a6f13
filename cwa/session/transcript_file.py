"""Read a transcript from a JSON-lines file: a Pi session file, or one message object per line.

A Pi session file (format version 3) is a tree of entries linked by `id`/`parentId` after a
`{"type": "session"}` header. The transcript is the branch ending at the last entry, as Pi builds
its context: `message` entries as they are, `custom_message` entries as `custom` messages,
`branch_summary` entries as `branchSummary` messages, and after the latest `compaction` on the
branch, its summary followed by the entries from `firstKeptEntryId` on. Other entry types
(model and label changes, extension data) carry no message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from cwa import limits
from cwa.errors import InvalidRequest
from cwa.input_files import read_file
from cwa.json_input import parse_json_body


def read_transcript(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """(messages, Pi session header or None) of a transcript file."""
    lines = []
    for number, line in enumerate(read_file(path, limits.MAX_REQUEST_BYTES).splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = parse_json_body(line, f"{path}:{number}")
        except InvalidRequest as exc:
            exc.details["line"] = number
            raise
        if not isinstance(value, dict):
            raise InvalidRequest(f"{path}:{number} is not a JSON object", reason="not-an-object", line=number)
        lines.append(value)
    header = lines[0] if lines and lines[0].get("type") == "session" else None
    if header is None and all("role" in line for line in lines):
        return lines, None
    return _branch_messages([line for line in lines if line is not header]), header


def parent_session_id(header: dict[str, Any] | None) -> str | None:
    """The parent's session id: the `id` in the header of the file `parentSession` names (the
    file stem when that file cannot be read)."""
    parent = header.get("parentSession") if header else None
    if not isinstance(parent, str) or not parent:
        return None
    try:
        with open(parent, "rb") as file:
            first = orjson.loads(file.readline())
        if isinstance(first, dict) and first.get("type") == "session" and isinstance(first.get("id"), str):
            return first["id"]
    except (OSError, orjson.JSONDecodeError):
        pass
    return Path(parent).stem


def _branch_messages(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_id = {e["id"]: e for e in entries if isinstance(e.get("id"), str)}
    branch: list[dict[str, Any]] = []
    current = entries[-1] if entries else None
    seen: set[str] = set()
    while current is not None and current.get("id") not in seen:  # a cycle cannot loop forever
        seen.add(current.get("id"))
        branch.append(current)
        current = by_id.get(current.get("parentId"))
    branch.reverse()
    compaction = max((i for i, e in enumerate(branch) if e.get("type") == "compaction"), default=None)
    if compaction is None:
        return [m for e in branch if (m := entry_message(e)) is not None]
    marker = branch[compaction]
    kept_from = next((i for i, e in enumerate(branch) if e.get("id") == marker.get("firstKeptEntryId")), compaction)
    summary = {
        "role": "compactionSummary",
        "summary": marker.get("summary", ""),
        "tokensBefore": marker.get("tokensBefore"),
        "timestamp": marker.get("timestamp"),
    }
    kept = [e for i, e in enumerate(branch) if kept_from <= i < compaction or i > compaction]
    return [summary, *(m for e in kept if (m := entry_message(e)) is not None)]


def entry_message(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The message a Pi entry carries (None: the entry carries none)."""
    kind = entry.get("type")
    if kind == "message" and isinstance(entry.get("message"), dict):
        return entry["message"]
    if kind == "custom_message":
        return {
            "role": "custom",
            "customType": entry.get("customType"),
            "content": entry.get("content", ""),
            "display": entry.get("display", True),
            "timestamp": entry.get("timestamp"),
        }
    if kind == "branch_summary":
        return {
            "role": "branchSummary",
            "summary": entry.get("summary", ""),
            "fromId": entry.get("fromId"),
            "timestamp": entry.get("timestamp"),
        }
    return None
