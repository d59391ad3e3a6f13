"""`cwa mcp`: the archive's agent tools over MCP (stdio), for Claude Code, Codex, OpenCode and
other MCP hosts. Needs the optional extra: `pip install 'cwa[mcp]'`.

The tools are the Pi extension's (cwa/integrations/routing.json: names, descriptions, JSON Schema
parameters) plus `context_window_status`; the routing guidance is the server's instructions, so
every host gets the same words. Project identity: `CWA_PROJECT`, else the real path of the working
directory; session: `CWA_SESSION`, else one id per server process. Each call runs the archive
method in a worker thread (one at a time per process); a caller's mistake comes back as a tool
result with `isError` and the typed error code, never as a crash.
"""

from __future__ import annotations

import functools
import os
import re
import threading
import uuid
from typing import Any, Callable, Mapping

import orjson

from cwa import agent_tools, routing
from cwa.api import Archive
from cwa.errors import CwaError, InvalidRequest

HOST = "mcp"


def identity(env: Mapping[str, str]) -> agent_tools.Scope:
    project = env.get("CWA_PROJECT") or os.path.realpath(os.getcwd())
    session = env.get("CWA_SESSION") or f"mcp-{uuid.uuid4().hex[:16]}"
    return agent_tools.Scope(project, session)


def run_tool(call: Callable[[str, Any], dict[str, Any]], scope: agent_tools.Scope, name: str,
             arguments: Any) -> tuple[str, dict[str, Any], bool]:
    """(text, structured details, is_error) of one tool call."""
    tool = agent_tools.TOOLS.get(name)
    try:
        if tool is None or name not in routing.tool_names(HOST):
            raise InvalidRequest(f"unknown tool {str(name)[:64]}", field="name", reason="unknown-tool",
                                 allowed=routing.tool_names(HOST))
        if arguments is not None and not isinstance(arguments, dict):
            raise InvalidRequest("arguments must be an object", field="arguments", reason="wrong-type")
        _check_arguments(name, arguments or {})
        text, details = tool(call, scope, arguments or {})
        return text, details, False
    except CwaError as error:
        return f"cwa {error.code}: {error.message}", {"error": error.to_json()}, True


# JSON Schema keywords → the contract's `reason` codes (docs/contract.md)
_REASONS = {"additionalProperties": "unknown-field", "type": "wrong-type", "enum": "not-allowed",
            "required": "missing", "minimum": "out-of-range", "maximum": "out-of-range",
            "minLength": "out-of-range", "maxLength": "out-of-range", "minItems": "out-of-range",
            "maxItems": "out-of-range"}


@functools.cache
def _validator(name: str):
    from jsonschema import Draft202012Validator

    return Draft202012Validator(routing.guidance()["tools"][name]["parameters"])


def _check_arguments(name: str, arguments: dict[str, Any]) -> None:
    """The tool's JSON Schema (the one the Pi host enforces), as a typed `invalid-request`."""
    from jsonschema.exceptions import best_match

    error = best_match(_validator(name).iter_errors(arguments))
    if error is None:
        return
    path = ".".join(str(part) for part in error.absolute_path)
    named = re.search(r"'([^']{1,64})'", error.message) if error.validator in ("required", "additionalProperties") else None
    field = ".".join(part for part in (path, named.group(1) if named else "") if part) or "arguments"
    raise InvalidRequest(f"{field}: {error.message[:200]}", field=field,
                         reason=_REASONS.get(error.validator, "invalid"))


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

    tools = [types.Tool(name=name, title=spec["label"], description=spec["description"],
                        input_schema=spec["parameters"])
             for name, spec in routing.guidance()["tools"].items() if name in routing.tool_names(HOST)]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params) -> types.CallToolResult:
        text, details, failed = await anyio.to_thread.run_sync(run_tool, call, scope, params.name, params.arguments)
        return types.CallToolResult(content=[types.TextContent(text=text)],
                                    structured_content=orjson.loads(orjson.dumps(details)), is_error=failed)

    return Server("cwa", version=__version__, instructions=routing.guidelines_text(),
                  on_list_tools=list_tools, on_call_tool=call_tool)


def serve_stdio(open_archive: Callable[[], Archive], env: Mapping[str, str]) -> int:
    """Serve MCP on stdin/stdout until the client closes them."""
    try:
        import anyio
        from mcp.server.stdio import stdio_server
    except ImportError as missing:
        raise InvalidRequest("cwa mcp needs the MCP SDK: pip install 'cwa[mcp]'", reason="missing-extra",
                             module=str(missing.name)) from missing
    scope = identity(env)
    archive = open_archive()

    async def main() -> None:
        server = build_server(archive, scope)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        archive.close()
    return 0
