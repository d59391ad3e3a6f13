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

import os
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


def _check_arguments(name: str, arguments: dict[str, Any]) -> None:
    """The tool's JSON Schema, as the Pi host enforces it: known fields, types, bounds, enums."""
    schema = routing.guidance()["tools"][name]["parameters"]
    properties = schema.get("properties", {})
    for key, value in arguments.items():
        spec = properties.get(key)
        if spec is None:
            raise InvalidRequest(f"unknown argument {key[:64]}", field=key, reason="unknown-field",
                                 allowed=sorted(properties))
        _check_value(key, spec, value)
    for key in schema.get("required", []):
        if key not in arguments:
            raise InvalidRequest(f"{key} is required", field=key, reason="missing")


def _check_value(path: str, spec: dict[str, Any], value: Any) -> None:
    kind = spec.get("type")
    checks = {"string": lambda v: isinstance(v, str), "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "array": lambda v: isinstance(v, list), "object": lambda v: isinstance(v, dict)}
    if kind in checks and not checks[kind](value):
        raise InvalidRequest(f"{path} must be of type {kind}", field=path, reason="wrong-type")
    if "enum" in spec and value not in spec["enum"]:
        raise InvalidRequest(f"{path} must be one of {', '.join(spec['enum'])}", field=path, reason="not-allowed",
                             allowed=spec["enum"])
    if kind == "string" and not spec.get("minLength", 0) <= len(value) <= spec.get("maxLength", 1 << 30):
        raise InvalidRequest(f"{path} has a length out of range", field=path, reason="out-of-range")
    if kind == "integer" and not spec.get("minimum", -(1 << 62)) <= value <= spec.get("maximum", 1 << 62):
        raise InvalidRequest(f"{path} is out of range", field=path, reason="out-of-range",
                             minimum=spec.get("minimum"), maximum=spec.get("maximum"))
    if kind == "array":
        if not spec.get("minItems", 0) <= len(value) <= spec.get("maxItems", 1 << 30):
            raise InvalidRequest(f"{path} has a number of items out of range", field=path, reason="out-of-range")
        for number, item in enumerate(value):
            _check_value(f"{path}[{number}]", spec.get("items", {}), item)
    if kind == "object" and "properties" in spec:
        for key, item in value.items():
            if key not in spec["properties"]:
                raise InvalidRequest(f"unknown field {path}.{key[:64]}", field=f"{path}.{key}", reason="unknown-field")
            _check_value(f"{path}.{key}", spec["properties"][key], item)
        for key in spec.get("required", []):
            if key not in value:
                raise InvalidRequest(f"{path}.{key} is required", field=f"{path}.{key}", reason="missing")


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
