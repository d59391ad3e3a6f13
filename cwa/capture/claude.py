"""Claude Code's transcripts: `~/.claude/projects/<cwd with / as ->/<session id>.jsonl`.

Each line is an object with a `type`. `user` and `assistant` lines carry an Anthropic `message`
(content as text or blocks: text, image, thinking, tool_use, tool_result) with `uuid`,
`parentUuid`, `timestamp`, `sessionId`, `cwd` and `isSidechain`. A streamed answer may be written
as several `assistant` lines with one `message.id`: they are one message. A tool result is a
`user` line of `tool_result` blocks. After a compaction a `system` line (`compact_boundary`) is
followed by a `user` line with `isCompactSummary`. `isMeta` lines are the client's own notes to
the model. Subagents (the Task tool) write `isSidechain` lines with an `agentId`, in the main file
(older releases) or in `<session id>/subagents/agent-<id>.jsonl` beside it. Every other line type
(attachments, queue operations, modes, titles, file snapshots) carries no message.

A file is one session (its stem); a line under another `sessionId` (a fork's copied history)
names the parent. `--resume` and `/compact` keep the file and the id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cwa.capture.transcripts import Problem, Transcript, Unit, file_unit, later, read_lines, stamp_of, turn_over

HOST = "claude"
NO_MESSAGE = frozenset(
    {
        "attachment",
        "system",
        "queue-operation",
        "last-prompt",
        "mode",
        "summary",
        "file-history-snapshot",
        "custom-title",
        "ai-title",
        "agent-name",
        "tag",
        "pr-link",
        "progress",
        "permission-mode",
        "worktree-state",
    }
)
STOP_REASONS = {"tool_use": "toolUse", "end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


def default_root(env: dict[str, str]) -> Path:
    """Claude Code's transcripts: under $CLAUDE_CONFIG_DIR, else ~/.claude."""
    return Path(env.get("CLAUDE_CONFIG_DIR") or Path(env.get("HOME") or Path.home()) / ".claude") / "projects"


def units(path: Path) -> list[Unit]:
    """A transcript file, and the subagent transcripts written beside it; a folder: every
    transcript under it."""
    if path.is_dir():
        return [file_unit(p, read) for p in sorted(path.rglob("*.jsonl"))]
    folder = path.with_suffix("") / "subagents"
    return [file_unit(p, read) for p in [path, *(sorted(folder.glob("*.jsonl")) if folder.is_dir() else [])]]


def _image(source: Any) -> dict[str, Any]:
    if isinstance(source, dict) and source.get("type") == "base64":
        return {"type": "image", "data": str(source.get("data", "")), "mimeType": str(source.get("media_type", ""))}
    where = source.get("url") if isinstance(source, dict) else None
    return {"type": "text", "text": f"[image {where or 'not inline'}]"}


def _blocks(content: Any) -> list[dict[str, Any]]:
    """Pi content blocks of Anthropic content (tool results excluded)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            blocks.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image":
            blocks.append(_image(block.get("source")))
        elif kind == "thinking":
            blocks.append({"type": "thinking", "thinking": str(block.get("thinking", ""))})
        elif kind == "tool_use":
            blocks.append(
                {
                    "type": "toolCall",
                    "id": str(block.get("id")),
                    "name": str(block.get("name")),
                    "arguments": block.get("input"),
                }
            )
        elif kind == "document":
            blocks.append({"type": "text", "text": f"[document {block.get('title') or ''}]".replace(" ]", "]")})
    return blocks


class _Session:
    def __init__(self, transcript: Transcript) -> None:
        self.transcript = transcript
        self.tools: dict[str, str] = {}  # tool_use id → tool name
        self.answer_id: str | None = None  # the message id of the assistant message being written

    def add(self, message: dict[str, Any], stamp: str | None) -> None:
        self.transcript.messages.append(message)
        self.transcript.updated = later(self.transcript.updated, stamp)

    def user(self, line: dict[str, Any], stamp: str | None) -> None:
        self.answer_id = None
        message = line.get("message") if isinstance(line.get("message"), dict) else {}
        content = message.get("content")
        if line.get("isCompactSummary"):
            text = "\n\n".join(b["text"] for b in _blocks(content) if b["type"] == "text")
            self.transcript.visible_from = len(self.transcript.messages)
            self.add({"role": "compactionSummary", "summary": text, "timestamp": stamp}, stamp)
            return
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                call = str(block.get("tool_use_id"))
                result = {
                    "role": "toolResult",
                    "toolCallId": call,
                    "toolName": self.tools.get(call, "tool"),
                    "content": _blocks(block.get("content")),
                    "isError": block.get("is_error") is True,
                    "timestamp": stamp,
                }
                self.add(result, stamp)
        own = _blocks(
            [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_result")]
            if isinstance(content, list)
            else content
        )
        if own:
            self.add({"role": "user", "content": own, "timestamp": stamp}, stamp)

    def assistant(self, line: dict[str, Any], stamp: str | None) -> None:
        message = line.get("message") if isinstance(line.get("message"), dict) else {}
        blocks = _blocks(message.get("content"))
        for block in blocks:
            if block["type"] == "toolCall":
                self.tools[block["id"]] = block["name"]
        reason = STOP_REASONS.get(message.get("stop_reason"))
        messages = self.transcript.messages
        if (
            message.get("id")
            and message.get("id") == self.answer_id
            and messages
            and messages[-1]["role"] == "assistant"
        ):
            last = messages[-1]
            last["content"] = [*last["content"], *blocks]  # one streamed answer written as several lines
        else:
            last = {"role": "assistant", "content": blocks, "timestamp": stamp}
            self.add(last, stamp)
        self.answer_id = message.get("id")
        if any(b["type"] == "toolCall" for b in last["content"]):
            reason = "toolUse"
        last["stopReason"] = reason or last.get("stopReason") or "stop"


def read(path: Path) -> tuple[list[Transcript], list[Problem]]:
    """The sessions of one transcript file: the main line and each subagent's."""
    lines = read_lines(path)
    main_id = path.stem
    ids = {line.get("sessionId") for _, line in lines if isinstance(line.get("sessionId"), str)}
    sidechain_of = next((line.get("sessionId") for _, line in lines if line.get("isSidechain")), None)
    if path.parent.name == "subagents" and isinstance(sidechain_of, str):
        main_id = sidechain_of  # a subagent's own file: its lines name the main session
    parent = next((i for i in sorted(ids - {main_id} - {None})), None)
    sessions: dict[str, _Session] = {}
    problems: list[Problem] = []
    unknown: set[str] = set()

    def session_of(line: dict[str, Any]) -> _Session:
        key, parent_id, subagent = main_id, parent, bool(line.get("isSidechain"))
        if subagent:
            key, parent_id = f"{main_id}/agent-{line.get('agentId') or 'sidechain'}", main_id
        if key not in sessions:
            sessions[key] = _Session(Transcript(HOST, key, parent_id, None, subagent=subagent))
        found = sessions[key]
        if found.transcript.cwd is None and isinstance(line.get("cwd"), str):
            found.transcript.cwd = line["cwd"]
        return found

    for number, line in lines:
        kind = line.get("type")
        if kind in ("user", "assistant"):
            if line.get("isMeta"):
                continue
            session = session_of(line)
            getattr(session, kind)(line, stamp_of(line.get("timestamp")))
        elif kind not in NO_MESSAGE and kind not in unknown:
            unknown.add(str(kind))
            problems.append(Problem(str(path), number, "unknown-type", f"line type {kind!r}"))
    transcripts = []
    for session in sessions.values():
        transcript = session.transcript
        transcript.settled = turn_over(transcript.messages)
        transcripts.append(transcript)
    return transcripts, problems
