"""`cwa mcp install claude|codex|opencode [--scope user|project] [--write]`: the entry that starts
`cwa mcp` in an MCP client's configuration, printed, or merged into the file idempotently (every
other entry kept, and every key of cwa's entry that cwa does not own — `env`, `timeout`,
`startup_timeout_sec`, … — kept too; the file replaced atomically: cwa/file_writes.py).

- claude: user scope `~/.claude.json` (`mcpServers.cwa`, no approval needed), or project scope,
  the project's `.mcp.json` (Claude Code asks the user to approve it once);
- codex: `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`), table `[mcp_servers.cwa]`;
- opencode: the project's `opencode.json`, `mcp.cwa` (type `local`).

The command is this installation's Python running `-m cwa mcp`, with `--db` when the archive is
not the built-in default (cwa/integrations/launch.py): Codex and the MCP Inspector give their
servers a filtered environment, where `CWA_DB` would not arrive.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cwa.archive_path import builtin_archive
from cwa.errors import InvalidRequest
from cwa.file_writes import write_atomically
from cwa.integrations.config_files import json_object, read_text, toml_document
from cwa.integrations.launch import cwa_command
from cwa.vocabulary import MCP_CLIENTS

CLIENTS = MCP_CLIENTS
SCOPES = ("project", "user")
NAME = "cwa"
OWNED = ("command", "args", "type", "enabled")  # the keys of the entry cwa writes


def command(db: Path | None = None, env: Mapping[str, str] | None = None) -> list[str]:
    env = env if env is not None else {}
    return cwa_command(db if db is not None else builtin_archive(env), env, "mcp")


def config_file(client: str, project: Path, env: Mapping[str, str], scope: str = "project") -> Path:
    home = Path(env.get("HOME", str(Path.home())))
    if client == "claude":
        return home / ".claude.json" if scope == "user" else project / ".mcp.json"
    if client == "codex":
        return Path(env.get("CODEX_HOME") or home / ".codex") / "config.toml"
    if client == "opencode":
        return project / "opencode.json"
    raise InvalidRequest(
        f"unknown MCP client {client[:32]}", field="client", reason="not-allowed", allowed=list(CLIENTS)
    )


def _entry(client: str, program: list[str]) -> dict[str, Any]:
    if client == "opencode":
        return {"type": "local", "command": program, "enabled": True}
    return {"command": program[0], "args": program[1:]}


def entry_text(client: str, program: list[str] | None = None) -> str:
    """The configuration entry as the client's file holds it."""
    program = program or command()
    if client == "codex":
        return f"[mcp_servers.{NAME}]\ncommand = {json.dumps(program[0])}\nargs = {json.dumps(program[1:])}\n"
    section = "mcpServers" if client == "claude" else "mcp"
    return json.dumps({section: {NAME: _entry(client, program)}}, indent=2)


def _merge_json(path: Path, text: str, section: str, value: dict[str, Any]) -> str:
    data = json_object(path, text, section)
    servers = data.setdefault(section, {})
    kept = servers.get(NAME) if isinstance(servers.get(NAME), dict) else {}
    servers[NAME] = {**{k: v for k, v in kept.items() if k not in OWNED}, **value}
    return json.dumps(data, indent=2) + "\n"


_TOML_TABLE = re.compile(r"^\[mcp_servers\.(?:cwa|\"cwa\")\]\s*$.*?(?=^\[|\Z)", re.MULTILINE | re.DOTALL)
_OWNED_LINE = re.compile(r"^(command|args)\s*=.*$", re.MULTILINE)


def _merge_toml(path: Path, text: str, program: list[str]) -> str:
    """Set `command` and `args` of the `[mcp_servers.cwa]` table (up to the next table header),
    keeping its other keys, or append the table. A file that is not TOML is refused."""
    toml_document(path, text)
    entry = entry_text("codex", program)
    found = _TOML_TABLE.search(text)
    if not found:
        return (text.rstrip("\n") + "\n\n" if text.strip() else "") + entry
    others = _OWNED_LINE.sub("", found.group(0).split("\n", 1)[1] if "\n" in found.group(0) else "")
    others = "\n".join(line for line in others.splitlines() if line.strip())
    table = entry + (others + "\n" if others else "") + ("\n" if found.end() < len(text) else "")
    return text[: found.start()] + table + text[found.end() :]


def install(
    client: str,
    project: Path,
    env: Mapping[str, str],
    write: bool,
    *,
    db: Path | None = None,
    scope: str = "project",
) -> dict[str, Any]:
    if scope == "user" and client != "claude":
        raise InvalidRequest(f"--scope user is for claude; {client} has one place", field="scope", reason="not-allowed")
    path = config_file(client, project, env, scope)
    program = command(db, env)
    before = read_text(path)
    if client == "codex":
        after = _merge_toml(path, before, program)
    elif client == "claude":
        after = _merge_json(path, before, "mcpServers", _entry(client, program))
    else:
        merged = _merge_json(path, before, "mcp", _entry(client, program))
        data = json.loads(merged)
        data.setdefault("$schema", "https://opencode.ai/config.json")
        after = json.dumps(data, indent=2) + "\n"
    changed = after != before
    if write and changed:
        write_atomically(path, after.encode("utf-8"))
    return {
        "client": client,
        "scope": scope if client == "claude" else None,
        "config": str(path),
        "entry": entry_text(client, program),
        "changed": changed,
        "written": write and changed,
    }
