"""`cwa mcp`: the archive's agent tools over MCP (stdio), for Claude Code, Codex, OpenCode and
other MCP hosts. Needs the MCP SDK, the optional `mcp` extra (in a checkout: `pip install -e '.[mcp]'`).

The tools are the Pi extension's (cwa/integrations/routing.json: names, descriptions, JSON Schema
parameters) plus `context_window_status`; the routing guidance is the server's instructions, so
every host gets the same words. Project identity: `CWA_PROJECT`, else the real path of the working
directory; session: `CWA_SESSION`, else one id per server process. Each call runs the archive
method in a worker thread (one at a time per process); a caller's mistake comes back as a tool
result with `isError` and the typed error code, never as a crash.
"""

from __future__ import annotations

import os
import sys
import threading
import uuid
from collections.abc import Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, BinaryIO

import orjson

from cwa import agent_tools, routing
from cwa.api import Archive
from cwa.errors import CwaError, InvalidRequest
from cwa.json_input import check_depth, parse_json_body
from cwa.serve import oversized_line, read_lines

HOST = "mcp"


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


def build_server(archive: Archive, scope: agent_tools.Scope):
    """The MCP server object (mcp's low-level Server) for `archive`."""
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel.server import Server

    from cwa import __version__

    lock = threading.Lock()  # one archive connection per process: calls take turns

    def call(method: str, params: Any) -> dict[str, Any]:
        with lock:
            return archive.call(method, params)

    tools = [
        types.Tool(name=name, title=spec["label"], description=spec["description"], input_schema=spec["parameters"])
        for name, spec in routing.guidance()["tools"].items()
        if name in routing.tool_names(HOST)
    ]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params) -> types.CallToolResult:
        answer = await anyio.to_thread.run_sync(run_tool, call, scope, params.name, params.arguments)
        return types.CallToolResult(
            content=[types.TextContent(text=answer["text"])],
            structured_content=orjson.loads(orjson.dumps(answer["details"])),
            is_error=answer["isError"],
        )

    return Server(
        "cwa",
        version=__version__,
        instructions=routing.guidelines_text(),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


# JSON-RPC 2.0's error codes for frames that never reach a method
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


def _rpc_error(request_id: Any, code: int, error: CwaError) -> bytes:
    data = {"code": error.code, **error.details}
    return (
        orjson.dumps(
            {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": error.message, "data": data}}
        )
        + b"\n"
    )


def frame_error(line: bytes | None) -> bytes | None:
    """The JSON-RPC error reply to a frame the SDK would drop without answering (so the client
    waiting on its id would hang), or None when the frame may go on to the SDK. `None` as the
    line stands for one longer than MAX_REQUEST_BYTES. A notification (no id) that is a valid
    request object gets no reply, as JSON-RPC says."""
    if line is None:
        return _rpc_error(None, INVALID_REQUEST, oversized_line())
    try:
        frame = parse_json_body(line, "frame", bounded=False)
    except CwaError as error:
        return _rpc_error(None, PARSE_ERROR if error.details.get("reason") == "bad-json" else INVALID_REQUEST, error)
    if not isinstance(frame, dict):
        return _rpc_error(
            None,
            INVALID_REQUEST,
            InvalidRequest("a frame must be one JSON-RPC object (no batches)", reason="not-an-object"),
        )
    request_id = frame.get("id")
    if "id" in frame and (isinstance(request_id, bool) or not isinstance(request_id, (str, int, type(None)))):
        return _rpc_error(
            None, INVALID_REQUEST, InvalidRequest("id must be a string or an integer", field="id", reason="wrong-type")
        )
    try:
        _check_frame(frame)
    except CwaError as error:
        code = INVALID_PARAMS if error.details.get("field", "").startswith("params") else INVALID_REQUEST
        if code == INVALID_PARAMS and "id" not in frame:
            return None  # a notification's params: nobody waits for an answer
        return _rpc_error(request_id, code, error)
    return _sdk_refusal(line, request_id)


def _sdk_refusal(line: bytes, request_id: Any) -> bytes | None:
    """What the SDK's own message model still refuses (it would drop it unanswered)."""
    import mcp_types

    try:
        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        first = str(exc).splitlines()[0][:200]
        return _rpc_error(
            request_id,
            INVALID_REQUEST,
            InvalidRequest(f"not a JSON-RPC message MCP knows: {first}", reason="not-jsonrpc"),
        )
    return None


def _check_frame(frame: dict[str, Any]) -> None:
    if frame.get("jsonrpc") != "2.0":
        raise InvalidRequest('jsonrpc must be "2.0"', field="jsonrpc", reason="not-allowed")
    if "method" not in frame:
        if "id" in frame and ("result" in frame or "error" in frame):
            return  # the client's answer to a request of the server's
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


@asynccontextmanager
async def checked_stdio(stdin: BinaryIO, stdout: BinaryIO):
    """The SDK's stdio transport, with every frame checked first (frame_error): a malformed
    frame is answered here with its JSON-RPC error instead of being dropped. Replies and errors
    go out through one writer, a whole line at a time."""
    import anyio
    from mcp.server.stdio import stdio_server

    lock = anyio.Lock()

    class Wire:
        async def write(self, text: str) -> None:
            async with lock:
                await anyio.to_thread.run_sync(stdout.write, text.encode("utf-8"))

        async def flush(self) -> None:
            async with lock:
                await anyio.to_thread.run_sync(stdout.flush)

    wire = Wire()
    lines = read_lines(stdin)  # serve's bounded reader: None for an oversized line
    end = object()

    class Frames:
        def __aiter__(self):
            return self

        async def __anext__(self) -> str:
            while True:
                line = await anyio.to_thread.run_sync(next, lines, end)
                if line is end:
                    raise StopAsyncIteration
                if line is not None and not line.strip():
                    continue
                reply = frame_error(line)
                if reply is None:
                    return line.decode("utf-8")
                await wire.write(reply.decode("utf-8"))
                await wire.flush()

    async with stdio_server(Frames(), wire) as streams:
        yield streams


def serve_stdio(open_archive: Callable[[], Archive], env: Mapping[str, str]) -> int:
    """Serve MCP on stdin/stdout until the client closes them."""
    try:
        import anyio
        import mcp.server.stdio  # noqa: F401
    except ImportError as missing:
        from cwa.integrations.mcp_clients import install_command

        fix = install_command()
        raise InvalidRequest(
            f"cwa mcp needs the MCP SDK; install it with: {fix}",
            reason="missing-extra",
            module=str(missing.name),
            install=fix,
        ) from missing
    scope = identity(env)
    archive = open_archive()

    async def main() -> None:
        server = build_server(archive, scope)
        async with checked_stdio(sys.stdin.buffer, sys.stdout.buffer) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        archive.close()
    return 0
