"""Codex's rollouts: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl` (CODEX_HOME
defaults to ~/.codex; `archived_sessions/` holds the ones the user archived).

Each line is `{timestamp, type, payload}`. `session_meta` names the thread (`id`, `cwd`, a fork's
`forked_from_id`); `response_item` lines are the model's input and output in the Responses API's
items: `message` (user, assistant, developer), `reasoning` (its summary), `function_call` /
`custom_tool_call` / `local_shell_call` and their `*_output`; `compacted` holds a compaction's
summary. `event_msg`, `turn_context`, `world_state` and `token_usage_record` carry no message. The
user messages Codex writes for itself (environment context, AGENTS.md instructions) and developer
messages are not the user's words and are skipped. `codex resume` appends to the same file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from cwa.capture.transcripts import Problem, Transcript, Unit, file_unit, later, read_lines, stamp_of, turn_over

HOST = "codex"
NO_MESSAGE = frozenset({"event_msg", "turn_context", "world_state", "token_usage_record"})
CLIENT_NOTES = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<turn_aborted>")
CALLS = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output")


def default_root(env: dict[str, str]) -> Path:
    return Path(env.get("CODEX_HOME") or Path(env.get("HOME") or Path.home()) / ".codex")


def units(path: Path) -> list[Unit]:
    """A rollout file; a folder (CODEX_HOME or its sessions/): every rollout under it."""
    if path.is_dir():
        return [file_unit(p, read) for p in sorted(path.rglob("rollout-*.jsonl"))]
    return [file_unit(path, read)]


def find_rollout(root: Path, thread_id: str) -> Path | None:
    """The rollout of a thread (its id ends the file name)."""
    return next(iter(sorted((root / "sessions").rglob(f"rollout-*{thread_id}.jsonl"))), None)


def _text(content: Any) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for item in content if isinstance(content, list) else ():
        if not isinstance(item, dict):
            continue
        if item.get("type") in ("input_text", "output_text", "text"):
            blocks.append({"type": "text", "text": str(item.get("text", ""))})
        elif item.get("type") in ("input_image", "image"):
            url = str(item.get("image_url", ""))
            head, _, data = url.partition(";base64,")
            if head.startswith("data:") and data:
                blocks.append({"type": "image", "data": data, "mimeType": head[5:]})
            else:
                blocks.append({"type": "text", "text": f"[image {url[:200]}]"})
    return blocks


def _output(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if isinstance(value, dict):
        inner = value.get("content", value.get("output"))
        return _output(inner) if inner is not None else [{"type": "text", "text": orjson.dumps(value).decode()}]
    if isinstance(value, list):
        return _text(value) or [{"type": "text", "text": orjson.dumps(value).decode()}]
    return []


def _arguments(item: dict[str, Any]) -> Any:
    if item.get("type") == "local_shell_call":
        return item.get("action")
    raw = item.get("arguments", item.get("input"))
    if isinstance(raw, str):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw
    return raw


def _named(value: Any, key: str) -> str | None:
    """The first string under `key` anywhere in nested objects."""
    if isinstance(value, dict):
        if isinstance(value.get(key), str):
            return value[key]
        value = list(value.values())
    for inner in value if isinstance(value, list) else ():
        if (found := _named(inner, key)) is not None:
            return found
    return None


def _parent(meta: dict[str, Any]) -> str | None:
    """A fork names the thread it came from; a subagent's thread (its `source`), the one that
    spawned it."""
    if isinstance(meta.get("forked_from_id"), str):
        return meta["forked_from_id"]
    return _named(meta.get("source"), "parent_thread_id")


class _Thread:
    def __init__(self, transcript: Transcript) -> None:
        self.transcript = transcript
        self.tools: dict[str, str] = {}
        self.answer: dict[str, Any] | None = None  # the assistant message items are added to

    def add(self, message: dict[str, Any], stamp: str | None) -> None:
        self.transcript.messages.append(message)
        self.transcript.updated = later(self.transcript.updated, stamp)

    def assistant_blocks(self, blocks: list[dict[str, Any]], stamp: str | None) -> None:
        if self.answer is None:
            self.answer = {"role": "assistant", "content": [], "timestamp": stamp, "stopReason": "stop"}
            self.add(self.answer, stamp)
        self.answer["content"].extend(blocks)
        if any(b["type"] == "toolCall" for b in blocks):
            self.answer["stopReason"] = "toolUse"

    def item(self, item: dict[str, Any], stamp: str | None) -> None:
        kind, role = item.get("type"), item.get("role")
        if kind == "message" and role == "assistant":
            self.assistant_blocks(_text(item.get("content")), stamp)
        elif kind == "message" and role == "user":
            blocks = _text(item.get("content"))
            text = "".join(b.get("text", "") for b in blocks).lstrip()
            if blocks and not text.startswith(CLIENT_NOTES):
                self.answer = None
                self.add({"role": "user", "content": blocks, "timestamp": stamp}, stamp)
        elif kind == "reasoning":
            summary = [s.get("text", "") for s in item.get("summary") or () if isinstance(s, dict)]
            if any(summary):
                self.assistant_blocks([{"type": "thinking", "thinking": "\n\n".join(summary)}], stamp)
        elif kind in CALLS:
            call = str(item.get("call_id") or item.get("id"))
            name = str(item.get("name") or ("shell" if kind == "local_shell_call" else "tool"))
            self.tools[call] = name
            self.assistant_blocks(
                [{"type": "toolCall", "id": call, "name": name, "arguments": _arguments(item)}], stamp
            )
        elif kind in OUTPUTS:
            call = str(item.get("call_id"))
            self.answer = None
            result = {
                "role": "toolResult",
                "toolCallId": call,
                "toolName": self.tools.get(call, "tool"),
                "content": _output(item.get("output")),
                "isError": isinstance(item.get("output"), dict) and item["output"].get("success") is False,
                "timestamp": stamp,
            }
            self.add(result, stamp)

    def compacted(self, payload: dict[str, Any], stamp: str | None) -> None:
        self.answer = None
        self.transcript.visible_from = len(self.transcript.messages)
        self.add({"role": "compactionSummary", "summary": str(payload.get("message", "")), "timestamp": stamp}, stamp)


def read(path: Path) -> tuple[list[Transcript], list[Problem]]:
    lines = read_lines(path)
    meta = next((line["payload"] for _, line in lines if line.get("type") == "session_meta"), None)
    meta = meta if isinstance(meta, dict) else {}
    thread_id = str(meta.get("id") or path.stem.split("-", 6)[-1])
    subagent = isinstance(meta.get("source"), dict) and "subagent" in meta["source"]
    thread = _Thread(Transcript(HOST, thread_id, _parent(meta), meta.get("cwd"), subagent=subagent))
    problems: list[Problem] = []
    unknown: set[str] = set()
    for number, line in lines:
        kind, payload = line.get("type"), line.get("payload")
        if kind == "response_item" and isinstance(payload, dict):
            thread.item(payload, stamp_of(line.get("timestamp")))
        elif kind == "compacted" and isinstance(payload, dict):
            thread.compacted(payload, stamp_of(line.get("timestamp")))
        elif kind == "turn_context" and thread.transcript.cwd is None and isinstance(payload, dict):
            thread.transcript.cwd = payload.get("cwd")
        elif kind not in NO_MESSAGE and kind != "session_meta" and kind not in unknown:
            unknown.add(str(kind))
            problems.append(Problem(str(path), number, "unknown-type", f"line type {kind!r}"))
    transcript = thread.transcript
    transcript.settled = turn_over(transcript.messages)
    return [transcript], problems
