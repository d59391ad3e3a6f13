"""`cwa hooks install|uninstall claude|codex|opencode [--project] [--write]`: cwa's capture and
hints in each client's own extension mechanism, every other setting kept, files replaced
atomically (cwa/file_writes.py). Without --write nothing is changed: the result says what would.

- claude: hooks in `~/.claude/settings.json` ($CLAUDE_CONFIG_DIR), or the project's
  `.claude/settings.json`: UserPromptSubmit (the hint), Stop and SubagentStop (settled turns),
  PreCompact (everything before compaction), SessionStart and SessionEnd (the transcript so far);
- codex: `notify` in `$CODEX_HOME/config.toml` (archive after each turn; it needs no trust), or,
  when the user's notify is another program, a Stop hook; and a UserPromptSubmit hook in
  `$CODEX_HOME/hooks.json` (the hint), which Codex runs once the user trusts it;
- opencode: a plugin file, `~/.config/opencode/plugin/cwa.ts` ($XDG_CONFIG_HOME), or the
  project's `.opencode/plugin/cwa.ts`.

Each hook runs the hook client (`python -m cwa.hook_client HOST`, cwa/hook_client.py) under this
installation's Python; it hands the event to the archive's hook server.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cwa.errors import InvalidRequest
from cwa.file_writes import write_atomically
from cwa.integrations.config_files import json_object, read_text, toml_document
from cwa.integrations.launch import hook_command

CLAUDE_EVENTS = {  # event → timeout in seconds (the hint is bounded tighter than archiving)
    "UserPromptSubmit": 10,
    "Stop": 60,
    "SubagentStop": 60,
    "PreCompact": 120,
    "SessionStart": 60,
    "SessionEnd": 60,
}
CODEX_HINT_EVENTS = {"UserPromptSubmit": 10}

PLUGIN = Path(__file__).with_name("opencode") / "plugin.ts"


def _runs_hook_client(argv: list[str]) -> bool:
    """A command cwa wrote: it runs the hook client module (whatever Python, archive or host)."""
    return any(a == "-m" and b == "cwa.hook_client" for a, b in zip(argv, argv[1:]))


def _is_ours(hook: Any) -> bool:
    if not isinstance(hook, dict) or not isinstance(hook.get("command"), str):
        return False
    try:
        return _runs_hook_client(shlex.split(hook["command"]))
    except ValueError:  # not shell words: not a command cwa wrote
        return False


def _without_ours(group: Any) -> Any:
    """A hook group without cwa's hooks (None when nothing is left of it)."""
    if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
        return group
    inner = [h for h in group["hooks"] if not _is_ours(h)]
    return {**group, "hooks": inner} if inner else None


def _with_hooks(data: dict[str, Any], wanted: dict[str, tuple[str, int]]) -> dict[str, Any]:
    """`data` with cwa's hooks removed from every event, then `wanted` (event → (command,
    timeout)) added as a group of its own; every other hook and key kept."""
    hooks = {}
    for event, groups in data.get("hooks", {}).items():
        kept = [_without_ours(group) for group in groups] if isinstance(groups, list) else groups
        if kept is groups or any(g is not None for g in kept):  # an event left with no hook is dropped
            hooks[event] = kept if kept is groups else [g for g in kept if g is not None]
    for event, (command, timeout) in wanted.items():
        hooks.setdefault(event, []).append({"hooks": [{"type": "command", "command": command, "timeout": timeout}]})
    result = {**data, "hooks": hooks}
    if not hooks:
        del result["hooks"]
    return result


def _change(path: Path, before: str, after: str, write: bool) -> dict[str, Any]:
    changed = after != before
    if write and changed:
        write_atomically(path, after.encode("utf-8"))
    return {"file": str(path), "changed": changed, "content": after}


def _hooks_file(path: Path, wanted: dict[str, tuple[str, int]], write: bool) -> dict[str, Any]:
    before = read_text(path)
    data = _with_hooks(json_object(path, before, "hooks"), wanted)
    after = json.dumps(data, indent=2) + "\n" if data or before.strip() else ""
    return _change(path, before, after, write)


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home())


def _claude(project: Path | None, env: Mapping[str, str], db: Path, install: bool, write: bool) -> dict[str, Any]:
    root = project / ".claude" if project else Path(env.get("CLAUDE_CONFIG_DIR") or _home(env) / ".claude")
    command = shlex.join(hook_command(db, env, "claude"))
    wanted = {event: (command, timeout) for event, timeout in CLAUDE_EVENTS.items()} if install else {}
    notes = ["Start claude as usual: settled turns are archived, hints reach the prompt."] if install else []
    return {"changes": [_hooks_file(root / "settings.json", wanted, write)], "notes": notes}


NOTIFY_LINE = re.compile(r"^notify\s*=.*$", re.MULTILINE)


def _codex(project: Path | None, env: Mapping[str, str], db: Path, install: bool, write: bool) -> dict[str, Any]:
    if project is not None:
        raise InvalidRequest(
            "Codex reads hooks and notify from $CODEX_HOME only; run without --project",
            field="project",
            reason="not-allowed",
        )
    home = Path(env.get("CODEX_HOME") or _home(env) / ".codex")
    config = home / "config.toml"
    before = read_text(config)
    current = toml_document(config, before).get("notify")
    program = hook_command(db, env, "codex")
    ours = isinstance(current, list) and _runs_hook_client([str(a) for a in current])
    notes = []
    after = before
    if ours:
        after = (
            NOTIFY_LINE.sub(lambda _: f"notify = {json.dumps(program)}", before, count=1)
            if install
            else NOTIFY_LINE.sub("", before, count=1).lstrip("\n")
        )
    elif current is None and install:
        after = f"notify = {json.dumps(program)}\n" + before  # a top-level key goes before any table
    elif install:
        notes.append(f"notify already runs {current}; turns are archived by a Stop hook instead (trust it in Codex)")
    uses_notify = install and (ours or current is None)
    command = shlex.join(program)
    wanted = {event: (command, timeout) for event, timeout in CODEX_HINT_EVENTS.items()} if install else {}
    if install and not uses_notify:
        wanted["Stop"] = (command, 60)
    if install:
        notes.append(
            "Codex runs hooks only once trusted: review and trust cwa's UserPromptSubmit hook in Codex "
            "(or run `codex --dangerously-bypass-hook-trust`); until then turns are archived but no hint is added."
        )
    changes = [_change(config, before, after, write), _hooks_file(home / "hooks.json", wanted, write)]
    return {"changes": changes, "notes": notes}


def plugin_text(db: Path, env: Mapping[str, str]) -> str:
    template = PLUGIN.read_text(encoding="utf-8")
    return template.replace('["cwa", "hook", "opencode"]', json.dumps(hook_command(db, env, "opencode")))


def _opencode(project: Path | None, env: Mapping[str, str], db: Path, install: bool, write: bool) -> dict[str, Any]:
    root = project / ".opencode" if project else Path(env.get("XDG_CONFIG_HOME") or _home(env) / ".config") / "opencode"
    path = root / "plugin" / "cwa.ts"
    before = read_text(path)
    if not install:
        if before:
            if write:
                path.unlink()
            return {"changes": [{"file": str(path), "changed": True, "content": ""}], "notes": []}
        return {"changes": [{"file": str(path), "changed": False, "content": ""}], "notes": []}
    notes = ["Start opencode as usual: settled turns are archived, hints join the user's message."]
    return {"changes": [_change(path, before, plugin_text(db, env), write)], "notes": notes}


HOSTS = {"claude": _claude, "codex": _codex, "opencode": _opencode}


def install(host: str, project: Path | None, env: Mapping[str, str], db: Path, write: bool) -> dict[str, Any]:
    return {"host": host, "written": write, **HOSTS[host](project, env, db, True, write)}


def uninstall(host: str, project: Path | None, env: Mapping[str, str], db: Path, write: bool) -> dict[str, Any]:
    return {"host": host, "written": write, **HOSTS[host](project, env, db, False, write)}
