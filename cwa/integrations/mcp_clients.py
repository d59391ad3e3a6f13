"""`cwa mcp install claude|codex|opencode [--write]`: the entry that starts `cwa mcp` in an MCP
client's configuration, printed, or merged into the file idempotently (every other entry and key
kept, the file replaced atomically: cwa/file_writes.py).

- claude: the project's `.mcp.json` (Claude Code's project scope), `mcpServers.cwa`
- codex: `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`), table `[mcp_servers.cwa]`
- opencode: the project's `opencode.json`, `mcp.cwa` (type `local`)

The command is this installation's Python running `-m cwa mcp`, so it works without activating
the environment cwa was installed into.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cwa.errors import InvalidRequest, StorageUnavailable
from cwa.file_writes import write_atomically
from cwa.vocabulary import MCP_CLIENTS

CLIENTS = MCP_CLIENTS
NAME = "cwa"


def command() -> list[str]:
    return [sys.executable, "-m", "cwa", "mcp"]


def config_file(client: str, project: Path, env: Mapping[str, str]) -> Path:
    if client == "claude":
        return project / ".mcp.json"
    if client == "codex":
        return Path(env.get("CODEX_HOME") or Path(env.get("HOME", str(Path.home()))) / ".codex") / "config.toml"
    if client == "opencode":
        return project / "opencode.json"
    raise InvalidRequest(
        f"unknown MCP client {client[:32]}", field="client", reason="not-allowed", allowed=list(CLIENTS)
    )


def entry_text(client: str) -> str:
    """The configuration entry as the client's file holds it."""
    program, *args = command()
    if client == "codex":
        return f"[mcp_servers.{NAME}]\ncommand = {json.dumps(program)}\nargs = {json.dumps(args)}\n"
    if client == "claude":
        return json.dumps({"mcpServers": {NAME: {"command": program, "args": args}}}, indent=2)
    return json.dumps({"mcp": {NAME: {"type": "local", "command": command(), "enabled": True}}}, indent=2)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageUnavailable(f"cannot read {path}: {exc}", path=str(path)) from exc


def _merge_json(path: Path, text: str, section: str, value: dict[str, Any]) -> str:
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            f"{path} is not valid JSON ({exc}); fix or remove it first",
            field="config",
            reason="bad-json",
            path=str(path),
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get(section, {}), dict):
        raise InvalidRequest(
            f"{path} does not hold an object {section!r}", field=section, reason="wrong-type", path=str(path)
        )
    data.setdefault(section, {})[NAME] = value
    return json.dumps(data, indent=2) + "\n"


_TOML_TABLE = re.compile(r"^\[mcp_servers\.(?:cwa|\"cwa\")\]\s*$.*?(?=^\[|\Z)", re.MULTILINE | re.DOTALL)


def _merge_toml(text: str) -> str:
    """Replace the `[mcp_servers.cwa]` table (up to the next table header), or append it."""
    entry = entry_text("codex")
    if _TOML_TABLE.search(text):
        return _TOML_TABLE.sub(lambda _: entry + "\n", text, count=1).rstrip("\n") + "\n"
    return (text.rstrip("\n") + "\n\n" if text.strip() else "") + entry


def install(client: str, project: Path, env: Mapping[str, str], write: bool) -> dict[str, Any]:
    path = config_file(client, project, env)
    before = _read(path)
    if client == "codex":
        after = _merge_toml(before)
    elif client == "claude":
        after = _merge_json(path, before, "mcpServers", json.loads(entry_text("claude"))["mcpServers"][NAME])
    else:
        merged = _merge_json(path, before, "mcp", json.loads(entry_text("opencode"))["mcp"][NAME])
        data = json.loads(merged)
        data.setdefault("$schema", "https://opencode.ai/config.json")
        after = json.dumps(data, indent=2) + "\n"
    changed = after != before
    if write and changed:
        write_atomically(path, after.encode("utf-8"))
    return {
        "client": client,
        "config": str(path),
        "entry": entry_text(client),
        "changed": changed,
        "written": write and changed,
    }
