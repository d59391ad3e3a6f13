"""A local model server on 127.0.0.1 for Claude Code, Codex and OpenCode, driven offline.

It speaks the three wire formats those clients use (../shared/HOSTS.md): Anthropic messages
(`POST /v1/messages`), OpenAI responses (`POST /v1/responses`) and OpenAI chat completions
(`POST /v1/chat/completions`), all streamed. Every request body is recorded. The script answers
a request whose latest input is a user message with a shell tool call running `command`, and a
request whose latest input is the tool's output with `reply` text; a request without tools (a
title or a compaction summary) gets `reply` text too.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Script:
    command: str = "echo hello-from-tool"
    reply: str = "Done."
    # (part of a tool's name, its arguments): call that tool instead of the shell when the client offers it
    tool: tuple[str, dict[str, Any]] | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0

    def pick(self, names: list[str], shell: str, shell_arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The tool to call and its arguments."""
        if self.tool is not None:
            wanted = next((n for n in names if self.tool[0] in n), None)
            if wanted is not None:
                return wanted, self.tool[1]
        return shell, shell_arguments


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    out = []
    for name, data in events:
        body = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {body}\n\n")
    return "".join(out).encode()


def _anthropic_wants_tool(body: dict[str, Any]) -> bool:
    if not body.get("tools"):
        return False
    messages = [m for m in body.get("messages", []) if m.get("role") != "system"]
    last = messages[-1] if messages else {}
    content = last.get("content")
    blocks = content if isinstance(content, list) else []
    return last.get("role") == "user" and not any(b.get("type") == "tool_result" for b in blocks)


def _anthropic(script: Script, body: dict[str, Any]) -> bytes:
    script.calls += 1
    start = {
        "type": "message_start",
        "message": {
            "id": f"msg_{script.calls}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "m"),
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
    }
    if _anthropic_wants_tool(body):
        tool, chosen = script.pick(
            [t.get("name", "") for t in body["tools"]], "Bash", {"command": script.command, "description": "run it"}
        )
        arguments = json.dumps(chosen)
        blocks = [
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "tool_use", "id": f"toolu_{script.calls}", "name": tool, "input": {}},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": arguments},
                },
            ),
        ]
        stop = "tool_use"
    else:
        blocks = [
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": script.reply}},
            ),
        ]
        stop = "end_turn"
    return _sse(
        [
            ("message_start", start),
            *blocks,
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


def _responses(script: Script, body: dict[str, Any]) -> bytes:
    script.calls += 1
    items = body.get("input", [])
    last = items[-1] if items else {}
    wants_tool = bool(body.get("tools")) and last.get("type") != "function_call_output"
    sequence = iter(range(1, 1000))
    response = {"id": f"resp_{script.calls}", "object": "response", "status": "in_progress", "output": []}
    events: list[tuple[str | None, dict[str, Any] | str]] = [
        ("response.created", {"type": "response.created", "sequence_number": next(sequence), "response": response})
    ]
    if wants_tool:
        names = []  # a namespace's tools (Codex puts each MCP server's in one) as "namespace/name"
        for t in body.get("tools", []):
            names += (
                [f"{t['name']}/{n.get('name')}" for n in t.get("tools", [])]
                if t.get("type") == "namespace"
                else [t.get("name", "")]
            )
        tool, chosen = script.pick(names, "exec_command", {"cmd": script.command})
        namespace, _, tool = tool.rpartition("/")
        item = {
            "type": "function_call",
            "id": f"fc_{script.calls}",
            "call_id": f"call_{script.calls}",
            "name": tool,
            "arguments": json.dumps(chosen),
            "status": "completed",
            **({"namespace": namespace} if namespace else {}),
        }
        events += [
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": next(sequence),
                    "output_index": 0,
                    "item": {**item, "arguments": ""},
                },
            ),
            (
                "response.function_call_arguments.done",
                {
                    "type": "response.function_call_arguments.done",
                    "sequence_number": next(sequence),
                    "output_index": 0,
                    "item_id": item["id"],
                    "arguments": item["arguments"],
                },
            ),
            (
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "sequence_number": next(sequence),
                    "output_index": 0,
                    "item": item,
                },
            ),
        ]
    else:
        part = {"type": "output_text", "text": script.reply, "annotations": []}
        item = {
            "type": "message",
            "id": f"m_{script.calls}",
            "role": "assistant",
            "status": "completed",
            "content": [part],
        }
        events += [
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": next(sequence),
                    "output_index": 0,
                    "item": {**item, "content": []},
                },
            ),
            (
                "response.content_part.added",
                {
                    "type": "response.content_part.added",
                    "sequence_number": next(sequence),
                    "output_index": 0,
                    "content_index": 0,
                    "item_id": item["id"],
                    "part": {**part, "text": ""},
                },
            ),
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "sequence_number": next(sequence),
                    "output_index": 0,
                    "content_index": 0,
                    "item_id": item["id"],
                    "delta": script.reply,
                },
            ),
            (
                "response.output_text.done",
                {
                    "type": "response.output_text.done",
                    "sequence_number": next(sequence),
                    "output_index": 0,
                    "content_index": 0,
                    "item_id": item["id"],
                    "text": script.reply,
                },
            ),
            (
                "response.content_part.done",
                {
                    "type": "response.content_part.done",
                    "sequence_number": next(sequence),
                    "output_index": 0,
                    "content_index": 0,
                    "item_id": item["id"],
                    "part": part,
                },
            ),
            (
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "sequence_number": next(sequence),
                    "output_index": 0,
                    "item": item,
                },
            ),
        ]
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    events.append(
        (
            "response.completed",
            {
                "type": "response.completed",
                "sequence_number": next(sequence),
                "response": {**response, "status": "completed", "usage": usage},
            },
        )
    )
    return _sse(events)


def _chat(script: Script, body: dict[str, Any]) -> bytes:
    script.calls += 1
    messages = body.get("messages", [])
    last = messages[-1] if messages else {}
    wants_tool = bool(body.get("tools")) and last.get("role") == "user"
    base = {"id": f"chat_{script.calls}", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    if wants_tool:
        names = [t.get("function", {}).get("name", "") for t in body.get("tools", [])]
        tool, chosen = script.pick(names, "bash", {"command": script.command, "description": "run it"})
        call = {
            "index": 0,
            "id": f"call_{script.calls}",
            "type": "function",
            "function": {"name": tool, "arguments": json.dumps(chosen)},
        }
        chunks = [
            {"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}, "finish_reason": None},
            {"index": 0, "delta": {}, "finish_reason": "tool_calls"},
        ]
    else:
        chunks = [
            {"index": 0, "delta": {"role": "assistant", "content": script.reply}, "finish_reason": None},
            {"index": 0, "delta": {}, "finish_reason": "stop"},
        ]
    events: list[tuple[str | None, dict[str, Any] | str]] = [(None, {**base, "choices": [c]}) for c in chunks]
    events.append(
        (None, {**base, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    )
    events.append((None, "[DONE]"))
    return _sse(events)


ROUTES = {"/v1/messages": _anthropic, "/v1/responses": _responses, "/v1/chat/completions": _chat}


class FauxModels:
    """`with FauxModels(script) as server:` serves on server.url until the block ends."""

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        script = self.script

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.end_headers()

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"data": []}')

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                route = ROUTES.get(self.path.split("?")[0])
                if route is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                script.requests.append({"path": self.path, "body": body})
                payload = route(script, body)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FauxModels:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
