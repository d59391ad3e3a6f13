"""`cwa mcp`: the archive's agent tools over MCP (stdio), for Claude Code, Codex, OpenCode and
other MCP hosts.

The tools are the Pi extension's (cwa/integrations/routing.json: names, descriptions, JSON Schema
parameters) plus `context_window_status`; the routing guidance is the server's instructions, so
every host gets the same words. Project identity: `CWA_PROJECT`, else the real path of the working
directory; session: `CWA_SESSION`, else one id per server process. A caller's mistake comes back
as a tool result with `isError` and the typed error code, never as a crash.

The server speaks MCP's handshake era (`initialize`; revisions 2024-11-05 to 2025-11-25, what
every host sends) itself, without the MCP SDK: importing the SDK took 0.7 s of a 0.9 s start, and
Codex leaves a server's tools out of a turn when it has not answered within about a second. A
client probing the stateless era (`server/discover`) gets method-not-found and falls back to
`initialize`, as that revision asks of clients.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO

import orjson

from cwa import agent_tools, routing
from cwa.api import Archive
from cwa.errors import CwaError, Internal, InvalidRequest
from cwa.json_input import check_depth, parse_json_body
from cwa.protocol_output import claimed_stdout
from cwa.serve import oversized_line, read_lines

HOST = "mcp"
# the handshake-era revisions this server answers in; a client asking for another gets the latest
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

# JSON-RPC 2.0's error codes
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603


def identity(env: Mapping[str, str]) -> agent_tools.Scope:
    project = env.get("CWA_PROJECT") or os.path.realpath(os.getcwd())
    session = env.get("CWA_SESSION") or f"mcp-{uuid.uuid4().hex[:16]}"
    return agent_tools.Scope(project, session)


def run_tool(
    call: Callable[[str, Any], dict[str, Any]], scope: agent_tools.Scope, name: str, arguments: Any
) -> dict[str, Any]:
    """One tool call, forwarded to the archive's `tool` method: `{text, details, isError}`."""
    request = {**scope.params(), "host": HOST, "name": name, "arguments": {} if arguments is None else arguments}
    try:
        return call("tool", request)
    except CwaError as error:  # the call itself refused (a tool name too long to be one)
        return agent_tools.refusal(error)


def tool_list() -> list[dict[str, Any]]:
    """The tools as MCP lists them."""
    return [
        {"name": name, "title": spec["label"], "description": spec["description"], "inputSchema": spec["parameters"]}
        for name, spec in routing.guidance()["tools"].items()
        if name in routing.tool_names(HOST)
    ]


def initialize_result(params: dict[str, Any]) -> dict[str, Any]:
    from cwa import __version__

    asked = params.get("protocolVersion")
    return {
        "protocolVersion": asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1],
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "cwa", "version": __version__},
        "instructions": routing.guidelines_text(),
    }


def tool_result(answer: dict[str, Any]) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": answer["text"]}],
        "structuredContent": answer["details"],
        "isError": answer["isError"],
    }


def _rpc_error(request_id: Any, code: int, error: CwaError) -> dict[str, Any]:
    data = {"code": error.code, **error.details}
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": error.message, "data": data}}


def read_frame(line: bytes | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the frame, None) for a valid JSON-RPC message, else (None, the error reply the spec names),
    so that a client waiting on an id never hangs. `None` as the line stands for one longer than
    MAX_REQUEST_BYTES. A notification (no id) with bad params gets no reply, as JSON-RPC says:
    (None, None)."""
    if line is None:
        return None, _rpc_error(None, INVALID_REQUEST, oversized_line())
    try:
        frame = parse_json_body(line, "frame", bounded=False)
    except CwaError as error:
        code = PARSE_ERROR if error.details.get("reason") == "bad-json" else INVALID_REQUEST
        return None, _rpc_error(None, code, error)
    if not isinstance(frame, dict):
        refusal = InvalidRequest("a frame must be one JSON-RPC object (no batches)", reason="not-an-object")
        return None, _rpc_error(None, INVALID_REQUEST, refusal)
    request_id = frame.get("id")
    if "id" in frame and (isinstance(request_id, bool) or not isinstance(request_id, (str, int, type(None)))):
        refusal = InvalidRequest("id must be a string or an integer", field="id", reason="wrong-type")
        return None, _rpc_error(None, INVALID_REQUEST, refusal)
    try:
        _check_frame(frame)
    except CwaError as error:
        code = INVALID_PARAMS if error.details.get("field", "").startswith("params") else INVALID_REQUEST
        if code == INVALID_PARAMS and "id" not in frame:
            return None, None  # a notification's params: nobody waits for an answer
        return None, _rpc_error(request_id, code, error)
    return frame, None


def _check_frame(frame: dict[str, Any]) -> None:
    if frame.get("jsonrpc") != "2.0":
        raise InvalidRequest('jsonrpc must be "2.0"', field="jsonrpc", reason="not-allowed")
    if "method" not in frame:
        if "id" in frame and ("result" in frame or "error" in frame):
            return  # a client's answer to a server request (this server sends none)
        raise InvalidRequest("a request needs a method", field="method", reason="missing")
    if not isinstance(frame["method"], str):
        raise InvalidRequest("method must be a string", field="method", reason="wrong-type")
    params = frame.get("params")
    if params is not None and not isinstance(params, dict):
        raise InvalidRequest("params must be an object", field="params", reason="wrong-type")
    check_depth(params, "params", field="params")
    if frame["method"] == "tools/call":
        if not isinstance((params or {}).get("name"), str):
            raise InvalidRequest(
                "params.name must be the tool's name, a string",
                field="params.name",
                reason="missing" if (params or {}).get("name") is None else "wrong-type",
            )
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise InvalidRequest("params.arguments must be an object", field="params.arguments", reason="wrong-type")


def _bug(exc: Exception) -> Internal:
    traceback.print_exc(file=sys.stderr)
    return Internal(f"{type(exc).__name__}: {exc}")


class Server:
    """One client's connection. Tool calls run one at a time on a worker thread (one archive
    connection per process), so `ping` and `tools/list` are answered while a long call runs;
    each reply is written as one whole line. A call the client cancels (`notifications/cancelled`)
    is not started if it still waits, and gets no answer, as the spec asks."""

    def __init__(self, archive: Archive, scope: agent_tools.Scope, out: BinaryIO) -> None:
        self.archive, self.scope, self.out = archive, scope, out
        self.tools = tool_list()
        self.calls = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cwa-mcp-tool")
        self.writing = threading.Lock()
        self.pending: set[Any] = set()  # ids of the tool calls asked for and not yet answered
        self.cancelled: set[Any] = set()
        self.gone = False  # the client closed its end of stdout

    def send(self, reply: dict[str, Any]) -> None:
        line = orjson.dumps(reply) + b"\n"
        with self.writing:
            try:
                self.out.write(line)
                self.out.flush()
            except OSError:  # a broken pipe: nobody is left to read an answer
                self.gone = True

    def answer(self, request_id: Any, result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def receive(self, line: bytes | None) -> None:
        """Answer one frame; a bug answers its request with an internal error, and the server goes on."""
        request_id = None
        try:
            frame, refusal = read_frame(line)
            if frame is not None:
                request_id = frame.get("id")
            self._dispatch(frame, refusal)
        except Exception as exc:
            self.send(_rpc_error(request_id, INTERNAL_ERROR, _bug(exc)))

    def _dispatch(self, frame: dict[str, Any] | None, refusal: dict[str, Any] | None) -> None:
        if refusal is not None:
            self.send(refusal)
        if frame is None or "method" not in frame:
            return  # refused, or a client's answer to a request (this server sends none)
        method, params = frame["method"], frame.get("params") or {}
        if "id" not in frame:  # a notification (initialized, cancelled, …): nothing to say
            cancelled = params.get("requestId")
            if method == "notifications/cancelled" and isinstance(cancelled, (str, int)) and cancelled in self.pending:
                self.cancelled.add(cancelled)
            return
        request_id = frame["id"]
        if method == "tools/call":
            self.pending.add(request_id)
            self.calls.submit(self._call, request_id, params["name"], params.get("arguments"))
        elif method == "initialize":
            self.answer(request_id, initialize_result(params))
        elif method == "tools/list":
            self.answer(request_id, {"tools": self.tools})
        elif method == "ping":
            self.answer(request_id, {})
        else:
            unknown = InvalidRequest(f"cwa's MCP server has no method {method!r}", field="method", reason="unknown")
            self.send(_rpc_error(request_id, METHOD_NOT_FOUND, unknown))

    def _call(self, request_id: Any, name: str, arguments: Any) -> None:
        try:
            if request_id in self.cancelled:
                return  # cancelled while it waited: not started
            try:
                answer = run_tool(self.archive.call, self.scope, name, arguments)
            except Exception as exc:  # the model reads the failure; the server goes on
                answer = agent_tools.refusal(_bug(exc))
            if request_id not in self.cancelled:
                self.answer(request_id, tool_result(answer))
        finally:
            self.pending.discard(request_id)
            self.cancelled.discard(request_id)

    def close(self) -> None:
        """Finish the calls already asked for, then stop."""
        self.calls.shutdown(wait=True)


def serve_stdio(open_archive: Callable[[], Archive], env: Mapping[str, str]) -> int:
    """Serve MCP on stdin/stdout until the client closes stdin."""
    with claimed_stdout() as replies:  # what else writes to stdout goes where stderr goes
        archive = open_archive()
        server = Server(archive, identity(env), replies)
        try:
            for line in read_lines(sys.stdin.buffer):
                if line is not None and not line.strip():
                    continue
                server.receive(line)
                if server.gone:
                    break
        finally:
            server.close()
            archive.close()
    return 0
