"""Session stores written in each client's own layout (../shared/HOSTS.md, docs/capture.md), for
the import tests: Claude Code's per-project JSONL transcripts, Codex's rollouts, OpenCode's SQLite
database and Pi's session files. Each builder writes what the client writes for a user prompt, a
shell tool call with its output, and a text answer, with the client's own extra lines around them.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from pathlib import Path
from typing import Any

_clock = itertools.count(1)


def stamp(minute: int) -> str:
    return f"2026-11-{10 + minute // 1440:02d}T{(minute // 60) % 24:02d}:{minute % 60:02d}:00.000Z"


def _line(value: dict[str, Any]) -> str:
    return json.dumps(value) + "\n"


# -- Claude Code -------------------------------------------------------------------------------


class ClaudeSession:
    """`<home>/.claude/projects/<cwd with / as ->/<session id>.jsonl`."""

    def __init__(self, home: Path, cwd: Path, session: str, minute: int = 0) -> None:
        self.cwd, self.session, self.minute = cwd, session, minute
        folder = home / ".claude" / "projects" / str(cwd).replace("/", "-")
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{session}.jsonl"
        self.parent_uuid: str | None = None

    def _common(self, **extra: Any) -> dict[str, Any]:
        self.minute += 1
        uuid = f"u-{self.session[:6]}-{next(_clock)}"
        common = {
            "parentUuid": self.parent_uuid,
            "isSidechain": False,
            "uuid": uuid,
            "timestamp": stamp(self.minute),
            "sessionId": self.session,
            "cwd": str(self.cwd),
            "version": "2.1.197",
            "gitBranch": "main",
            "userType": "external",
            **extra,
        }
        self.parent_uuid = uuid
        return common

    def write(self, *lines: dict[str, Any]) -> None:
        with self.path.open("a") as out:
            out.writelines(_line(line) for line in lines)

    def user(self, text: str, **extra: Any) -> dict[str, Any]:
        return {**self._common(**extra), "type": "user", "message": {"role": "user", "content": text}}

    def assistant(self, content: list[dict[str, Any]], stop: str, message_id: str, **extra: Any) -> dict[str, Any]:
        message = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": content,
            "stop_reason": stop,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        return {**self._common(**extra), "type": "assistant", "message": message}

    def turn(self, prompt: str, command: str, output: str, answer: str, **extra: Any) -> list[dict[str, Any]]:
        """A prompt, a Bash call streamed as two lines of one message, its result, the answer."""
        call = f"toolu_{next(_clock)}"
        first = f"msg_{next(_clock)}"
        return [
            {
                "type": "queue-operation",
                "operation": "enqueue",
                "timestamp": stamp(self.minute),
                "sessionId": self.session,
            },
            self.user(prompt, **extra),
            {**self._common(**extra), "type": "attachment", "attachment": {"type": "skill_listing", "content": "- x"}},
            self.assistant([{"type": "text", "text": "Let me check."}], None, first, **extra),
            self.assistant(
                [{"type": "tool_use", "id": call, "name": "Bash", "input": {"command": command}}],
                "tool_use",
                first,
                **extra,
            ),
            {
                **self._common(**extra),
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [{"tool_use_id": call, "type": "tool_result", "content": output, "is_error": False}],
                },
                "toolUseResult": {"stdout": output, "stderr": ""},
            },
            self.assistant([{"type": "text", "text": answer}], "end_turn", f"msg_{next(_clock)}", **extra),
            {"type": "last-prompt", "lastPrompt": prompt, "sessionId": self.session},
        ]

    def compaction(self, summary: str) -> list[dict[str, Any]]:
        boundary = {
            **self._common(),
            "type": "system",
            "subtype": "compact_boundary",
            "content": "Conversation compacted",
            "compactMetadata": {"trigger": "manual", "preTokens": 1000},
        }
        self.parent_uuid = boundary["uuid"]
        return [
            boundary,
            {**self.user(summary), "isCompactSummary": True},
            {**self.user("<local-command-caveat>Caveat: …</local-command-caveat>"), "isMeta": True},
        ]

    def subagent_file(self, agent: str, prompt: str, command: str, output: str, answer: str) -> Path:
        """Claude Code 2.1 writes a subagent's transcript beside the session's, as sidechain lines."""
        folder = self.path.with_suffix("") / "subagents"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"agent-{agent}.jsonl"
        lines = self.turn(prompt, command, output, answer, isSidechain=True, agentId=agent)
        with path.open("w") as out:
            out.writelines(_line(line) for line in lines if line.get("type") != "last-prompt")
        return path


# -- Codex ---------------------------------------------------------------------------------------


class CodexRollout:
    """`<CODEX_HOME>/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`."""

    def __init__(self, codex_home: Path, cwd: Path, thread: str, minute: int = 0, **meta: Any) -> None:
        self.cwd, self.thread, self.minute = cwd, thread, minute
        folder = codex_home / "sessions" / "2026" / "11" / "10"
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"rollout-2026-11-10T00-00-00-{thread}.jsonl"
        self.ordinal = itertools.count()
        self.write(
            self.entry(
                "session_meta",
                {
                    "id": thread,
                    "session_id": thread,
                    "cwd": str(cwd),
                    "cli_version": "0.171.0",
                    "source": "exec",
                    **meta,
                },
            )
        )

    def entry(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        self.minute += 1
        return {"timestamp": stamp(self.minute), "ordinal": next(self.ordinal), "type": kind, "payload": payload}

    def write(self, *lines: dict[str, Any]) -> None:
        with self.path.open("a") as out:
            out.writelines(_line(line) for line in lines)

    def turn(self, prompt: str, command: str, output: str, answer: str) -> list[dict[str, Any]]:
        call = f"call_{next(_clock)}"
        item = self.entry
        return [
            item("event_msg", {"type": "task_started", "turn_id": "t"}),
            item(
                "response_item",
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "<permissions instructions>…"}],
                },
            ),
            item(
                "response_item",
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {
                            "type": "input_text",
                            "text": f"<environment_context>\n  <cwd>{self.cwd}</cwd>\n</environment_context>",
                        }
                    ],
                },
            ),
            item("turn_context", {"cwd": str(self.cwd), "model": "m"}),
            item(
                "response_item",
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]},
            ),
            item("response_item", {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}),
            item(
                "response_item",
                {
                    "type": "function_call",
                    "name": "exec_command",
                    "arguments": json.dumps({"cmd": command}),
                    "call_id": call,
                },
            ),
            item(
                "response_item",
                {
                    "type": "function_call_output",
                    "call_id": call,
                    "output": f"Process exited with code 0\nOutput:\n{output}",
                },
            ),
            item("event_msg", {"type": "token_count", "info": None}),
            item(
                "response_item",
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]},
            ),
            item("event_msg", {"type": "task_complete", "last_agent_message": answer}),
        ]


# -- OpenCode ------------------------------------------------------------------------------------

OPENCODE_TABLES = """
CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, workspace_id TEXT, parent_id TEXT, slug TEXT,
  directory TEXT, path TEXT, title TEXT, version TEXT, share_url TEXT, summary_additions INTEGER,
  summary_deletions INTEGER, summary_files INTEGER, summary_diffs TEXT, metadata TEXT, cost REAL,
  tokens_input INTEGER, tokens_output INTEGER, tokens_reasoning INTEGER, tokens_cache_read INTEGER,
  tokens_cache_write INTEGER, revert TEXT, permission TEXT, agent TEXT, model TEXT, time_created INTEGER,
  time_updated INTEGER, time_compacting INTEGER, time_archived INTEGER);
CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, time_updated INTEGER, data TEXT);
CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, time_created INTEGER,
  time_updated INTEGER, data TEXT);
"""

BASE_MS = 1_794_300_000_000


class OpenCodeStore:
    """`<XDG_DATA_HOME>/opencode/opencode.db`, tables as OpenCode 1.18 writes them."""

    def __init__(self, data_home: Path) -> None:
        folder = data_home / "opencode"
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "opencode.db"
        conn = sqlite3.connect(self.path)
        conn.executescript(OPENCODE_TABLES)
        conn.close()
        self.ids = itertools.count(100)

    def _id(self, prefix: str) -> str:
        return f"{prefix}_{next(self.ids):012d}"

    def session(self, session: str, cwd: Path, parent: str | None = None) -> None:
        with sqlite3.connect(self.path) as conn:
            conn.execute(
                "INSERT INTO session (id, parent_id, directory, title, version, time_created, time_updated) "
                "VALUES (?, ?, ?, 't', '1.18.33', ?, ?)",
                (session, parent, str(cwd), BASE_MS, BASE_MS),
            )

    def message(self, session: str, data: dict[str, Any], parts: list[dict[str, Any]]) -> str:
        message = self._id("msg")
        at = BASE_MS + next(self.ids) * 1000
        with sqlite3.connect(self.path) as conn:
            conn.execute(
                "INSERT INTO message VALUES (?, ?, ?, ?, ?)",
                (message, session, at, at, json.dumps({**data, "time": {"created": at}})),
            )
            for part in parts:
                conn.execute(
                    "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                    (self._id("prt"), message, session, at, at, json.dumps(part)),
                )
            conn.execute("UPDATE session SET time_updated = ? WHERE id = ?", (at, session))
        return message

    def turn(self, session: str, prompt: str, command: str, output: str, answer: str) -> None:
        user = self.message(session, {"role": "user", "agent": "build"}, [{"type": "text", "text": prompt}])
        call = f"call_{next(_clock)}"
        tool = {
            "type": "tool",
            "tool": "bash",
            "callID": call,
            "state": {
                "status": "completed",
                "input": {"command": command, "description": "run"},
                "output": output,
                "metadata": {"exit": 0},
                "title": command,
                "time": {"start": BASE_MS, "end": BASE_MS + 5},
            },
        }
        self.message(
            session,
            {"role": "assistant", "parentID": user, "finish": "tool-calls"},
            [{"type": "step-start"}, tool, {"type": "step-finish", "reason": "tool-calls"}],
        )
        self.message(
            session,
            {"role": "assistant", "parentID": user, "finish": "stop"},
            [{"type": "step-start"}, {"type": "text", "text": answer}, {"type": "step-finish", "reason": "stop"}],
        )


# -- Pi --------------------------------------------------------------------------------------------


def pi_session(
    agent_dir: Path, cwd: Path, session: str, turns: list[tuple[str, str, str, str]], parent_file: Path | None = None
) -> Path:
    folder = agent_dir / "sessions" / ("--" + str(cwd).strip("/").replace("/", "-") + "--")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"2026-11-10T00-00-00-000Z_{session}.jsonl"
    header = {"type": "session", "version": 3, "id": session, "timestamp": stamp(0), "cwd": str(cwd)}
    if parent_file is not None:
        header["parentSession"] = str(parent_file)
    entries, parent, minute = [header], None, 0
    for prompt, command, output, answer in turns:
        call = f"call_{next(_clock)}"
        for message in (
            {"role": "user", "content": [{"type": "text", "text": prompt}]},
            {
                "role": "assistant",
                "content": [{"type": "toolCall", "id": call, "name": "bash", "arguments": {"command": command}}],
                "stopReason": "toolUse",
            },
            {
                "role": "toolResult",
                "toolCallId": call,
                "toolName": "bash",
                "content": [{"type": "text", "text": output}],
                "isError": False,
            },
            {"role": "assistant", "content": [{"type": "text", "text": answer}], "stopReason": "stop"},
        ):
            minute += 1
            entry_id = f"e{next(_clock)}"
            entries.append(
                {
                    "type": "message",
                    "id": entry_id,
                    "parentId": parent,
                    "timestamp": stamp(minute),
                    "message": {**message, "timestamp": stamp(minute)},
                }
            )
            parent = entry_id
    entries.append(
        {"type": "model_change", "id": f"e{next(_clock)}", "parentId": parent, "provider": "x", "modelId": "y"}
    )
    path.write_text("".join(_line(e) for e in entries))
    return path
