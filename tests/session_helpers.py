"""Pi-shaped transcripts and a host that drives the session engine the way the Pi extension does."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
from conftest import hermetic_env

from cwa.api import Archive

T0 = 1_795_000_000_000  # 2026-11-19, epoch milliseconds as Pi writes them
PROJECT = "/work/shop"


class Transcript:
    """A growing Pi transcript with deterministic timestamps."""

    def __init__(self, start: int = T0) -> None:  # `start`: epoch ms (an old one: a session resumed late)
        self.messages: list[dict[str, Any]] = []
        self.start = start
        self.clock = 0
        self.calls = 0

    def _at(self) -> int:
        self.clock += 1_000
        return self.start + self.clock

    def user(self, text: str, images: int = 0) -> dict[str, Any]:
        content: Any = text
        if images:
            content = [{"type": "text", "text": text}] + [
                {"type": "image", "data": "aGVsbG8=" * 4, "mimeType": "image/png"} for _ in range(images)
            ]
        return self._add({"role": "user", "content": content, "timestamp": self._at()})

    def assistant(self, text: str, stop: str = "stop") -> dict[str, Any]:
        return self._add(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": text}],
                "api": "faux",
                "provider": "faux",
                "model": "faux-1",
                "usage": {},
                "stopReason": stop,
                "timestamp": self._at(),
            }
        )

    def tool(self, output: str, name: str = "bash", arguments: dict | None = None, error: bool = False) -> str:
        """An assistant tool call and its result; returns the call id."""
        self.calls += 1
        call = f"call_{self.calls}"
        self._add(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "toolCall",
                        "id": call,
                        "name": name,
                        "arguments": arguments or {"command": f"run {self.calls}"},
                    }
                ],
                "api": "faux",
                "provider": "faux",
                "model": "faux-1",
                "usage": {},
                "stopReason": "toolUse",
                "timestamp": self._at(),
            }
        )
        self._add(
            {
                "role": "toolResult",
                "toolCallId": call,
                "toolName": name,
                "content": [{"type": "text", "text": output}],
                "isError": error,
                "timestamp": self._at(),
            }
        )
        return call

    def turn(self, question: str, answer: str = "Done.", tools: tuple[str, ...] = ()) -> None:
        self.user(question)
        for output in tools:
            self.tool(output)
        self.assistant(answer)

    def _add(self, message: dict[str, Any]) -> dict[str, Any]:
        self.messages.append(message)
        return message


class Host:
    """Sends only new messages with the digest of the prefix (as the Pi extension does) and keeps
    the provider copy by applying the engine's delta answers."""

    def __init__(self, archive: Archive, session: str = "live", model: dict | None = None, **extra: Any) -> None:
        self.archive, self.session = archive, session
        self.model = model or {"id": "faux-1", "provider": "faux", "contextWindow": 200_000, "maxTokens": 8_192}
        self.extra = extra
        self.sent = 0
        self.digest: str | None = None
        self.copy: list[dict[str, Any]] = []
        self.copies: list[list[dict[str, Any]]] = []
        self.events: list[dict[str, Any]] = []
        self.status: dict[str, Any] = {}

    def params(self, messages: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
        return {
            "project": PROJECT,
            "sessionId": self.session,
            "model": self.model,
            "messages": messages,
            **self.extra,
            **more,
        }

    def context(self, transcript: Transcript) -> list[dict[str, Any]]:
        new = transcript.messages[self.sent :]
        request = self.params(new, answer="delta")
        if self.digest is not None:
            request["baseDigest"] = self.digest
        else:
            request["messages"] = transcript.messages
        result = self.archive.call("session-context", copy.deepcopy(request))
        delta = result["delta"]
        self.copy = self.copy[: delta["keep"]] + delta["append"]
        self.copies.append(self.copy)
        self.digest, self.sent = result["digest"], len(transcript.messages)
        self.events.extend(result["events"])
        self.status = result["status"]
        return self.copy

    def full(self, transcript: Transcript, **more: Any) -> dict[str, Any]:
        return self.archive.call("session-context", self.params(transcript.messages, **more))


def hints(copy_: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in copy_ if m.get("customType") == "cwa-hint"]


def texts(copy_: list[dict[str, Any]]) -> list[str]:
    out = []
    for message in copy_:
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.append("\n".join(b.get("text", "") for b in content if isinstance(b, dict)))
        else:
            out.append(message.get("output") or message.get("summary") or "")
    return out


class Serve:
    """A real `cwa serve` child on `folder`/archive.db, called one request at a time."""

    def __init__(self, folder: Path, *options: str) -> None:
        self.child = subprocess.Popen(
            [sys.executable, "-m", "cwa", "serve", "--no-background", *options],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=hermetic_env(folder, folder / "archive.db"),
        )
        self.number = 0

    def call(self, method: str, params: dict) -> dict:
        self.number += 1
        self.child.stdin.write(orjson.dumps({"id": self.number, "method": method, "params": params}) + b"\n")
        self.child.stdin.flush()
        reply = orjson.loads(self.child.stdout.readline())
        assert reply["id"] == self.number and "result" in reply, reply
        return reply["result"]
