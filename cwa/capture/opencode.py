"""OpenCode's sessions: one SQLite database, `$XDG_DATA_HOME/opencode/opencode.db` (default
~/.local/share/opencode/opencode.db), read-only.

Tables `session` (id, parent_id, directory, time_updated), `message` (id, session_id,
time_created, JSON `data`: role, time, finish, summary) and `part` (id, message_id, JSON `data`
with a `type`: text, reasoning, tool with its `state` {status, input, output, error}, file,
step-start/step-finish, snapshot, patch, agent, subtask, compaction, retry). A subagent (the task
tool) runs as a child session (`parent_id`); a compaction's summary is an assistant message with
`summary: true`. Each session is compared by its update time, so a re-run reads only the
sessions that changed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import apsw
import orjson

from cwa.capture.transcripts import Problem, Transcript, Unit, later, stamp_of, turn_over
from cwa.store.sqlfiles import queries

HOST = "opencode"
NO_MESSAGE = frozenset({"step-start", "step-finish", "snapshot", "patch", "compaction", "retry"})


def default_root(env: dict[str, str]) -> Path:
    data = env.get("XDG_DATA_HOME") or Path(env.get("HOME") or Path.home()) / ".local" / "share"
    return Path(data) / "opencode" / "opencode.db"


def _open(path: Path) -> apsw.Connection:
    return apsw.Connection(f"file:{path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)


def units(path: Path) -> list[Unit]:
    """One unit per session of the database (a folder: its opencode.db)."""
    database = path / "opencode.db" if path.is_dir() else path
    real = os.path.realpath(database)
    conn = _open(database)
    try:
        rows = conn.execute(queries("opencode")["sessions"]).fetchall()
    finally:
        conn.close()
    return [
        Unit(f"{real}#{session}", f"{updated}:{count}", size, lambda s=session: read(database, s))
        for session, updated, count, size in rows
    ]


def _file(part: dict[str, Any]) -> dict[str, Any]:
    url, mime = str(part.get("url", "")), str(part.get("mime", ""))
    head, _, data = url.partition(";base64,")
    if head.startswith("data:image/") and data:
        return {"type": "image", "data": data, "mimeType": mime or head[5:]}
    return {"type": "text", "text": f"[file {part.get('filename') or url[:200]} {mime}]"}


def read(database: Path, session: str) -> tuple[list[Transcript], list[Problem]]:
    conn = _open(database)
    try:
        named = queries("opencode")
        row = conn.execute(named["session"], (session,)).fetchone()
        parts: dict[str, list[dict[str, Any]]] = {}
        for message_id, data in conn.execute(named["parts"], (session,)):
            parts.setdefault(message_id, []).append(orjson.loads(data))
        messages = [(m, orjson.loads(d)) for m, d in conn.execute(named["messages"], (session,))]
    finally:
        conn.close()
    parent, directory = row if row else (None, None)
    transcript = Transcript(HOST, session, parent, directory, subagent=parent is not None)
    problems: list[Problem] = []
    where = f"{os.path.realpath(database)}#{session}"
    for message_id, info in messages:
        stamp = stamp_of((info.get("time") or {}).get("created"))
        transcript.updated = later(transcript.updated, stamp)
        blocks: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for part in parts.get(message_id, []):
            kind = part.get("type")
            if kind == "text" and not part.get("synthetic") and not part.get("ignored"):
                blocks.append({"type": "text", "text": str(part.get("text", ""))})
            elif kind == "reasoning":
                blocks.append({"type": "thinking", "thinking": str(part.get("text", ""))})
            elif kind == "file":
                blocks.append(_file(part))
            elif kind in ("agent", "subtask"):
                blocks.append({"type": "text", "text": f"[{kind} {part.get('name') or part.get('agent') or ''}]"})
            elif kind == "tool":
                state = part.get("state") or {}
                call, name = str(part.get("callID")), str(part.get("tool"))
                blocks.append({"type": "toolCall", "id": call, "name": name, "arguments": state.get("input")})
                if state.get("status") in ("completed", "error"):
                    failed = state.get("status") == "error"
                    output = state.get("error") if failed else state.get("output")
                    results.append(
                        {
                            "role": "toolResult",
                            "toolCallId": call,
                            "toolName": name,
                            "content": [{"type": "text", "text": str(output or "")}],
                            "isError": failed,
                            "timestamp": stamp_of((state.get("time") or {}).get("end")) or stamp,
                        }
                    )
            elif kind not in NO_MESSAGE and kind != "text":
                problems.append(Problem(where, None, "unknown-type", f"part {part.get('id')} of type {kind!r}"))
        role = info.get("role")
        if role == "assistant" and info.get("summary") is True:
            transcript.visible_from = len(transcript.messages)
            text = "\n\n".join(b["text"] for b in blocks if b["type"] == "text")
            transcript.messages.append({"role": "compactionSummary", "summary": text, "timestamp": stamp})
        elif role == "assistant":
            calls = any(b["type"] == "toolCall" for b in blocks)
            reason = "toolUse" if calls or info.get("finish") == "tool-calls" else "stop"
            transcript.messages.append(
                {"role": "assistant", "content": blocks, "timestamp": stamp, "stopReason": reason}
            )
            transcript.messages.extend(results)
        elif role == "user" and blocks:
            transcript.messages.append({"role": "user", "content": blocks, "timestamp": stamp})
        elif role not in ("user", "assistant"):
            problems.append(Problem(where, None, "unknown-type", f"message {message_id} of role {role!r}"))
    transcript.settled = turn_over(transcript.messages)
    return [transcript], problems
