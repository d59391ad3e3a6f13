"""`cwa hook HOST`: what a client's hook (or plugin) asks of cwa, answered without ever failing it.

The event arrives as JSON on stdin (Claude Code's and Codex's hook input, or what cwa's OpenCode
plugin sends), or for Codex's `notify` program as one argument:

- a prompt about to be sent (`UserPromptSubmit`, the plugin's `prompt`): preflight on the user's
  words; a hint comes back as the client's additional context (the same frozen bytes, budgets and
  labels as in Pi; "nothing" prints nothing). Messages the client still shows (its transcript
  since the latest compaction, as last archived) are not hinted back to it;
- a turn settled (`Stop`, `SubagentStop`, the plugin's `idle`, Codex's `agent-turn-complete`),
  a session starting or resuming or ending, or a compaction about to drop history (`PreCompact`,
  the plugin's `compacting`): the session's transcript is imported (cwa/capture/importer.py), so
  every settled turn is archived once.

Whatever goes wrong is logged beside the archive (cwa/hook_failures.py, shown by `cwa doctor`)
and the hook exits 0 with no output: the client goes on as if cwa were not there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3

from cwa import hook_failures, limits
from cwa.capture import claude, codex, importer, opencode
from cwa.errors import CwaError
from cwa.hook_client import PROMPT_EVENTS, event_name
from cwa.store import imports

ARCHIVE_EVENTS = frozenset(
    {"Stop", "SubagentStop", "PreCompact", "SessionStart", "SessionEnd", "idle", "compacting", "agent-turn-complete"}
)


def project_of(event: dict[str, Any], env: dict[str, str]) -> str:
    return env.get("CWA_PROJECT") or os.path.realpath(str(event.get("cwd") or os.getcwd()))


def hint(archive: Any, host: str, event: dict[str, Any], env: dict[str, str]) -> str | None:
    """The hint text for the prompt, or None."""
    prompt = event.get("prompt")
    session = event.get("session_id") or event.get("sessionID")
    if not isinstance(prompt, str) or not prompt.strip() or not isinstance(session, str) or not session:
        return None
    project = project_of(event, env)
    # the prompt's own id when the client gives one, so a resent prompt gets the frozen answer
    own = event.get("prompt_id") or event.get("turn_id") or event.get("messageID")
    key = (
        f"{host}:{own}" if isinstance(own, str) and own else f"{host}:{blake3.blake3(prompt.encode()).hexdigest()[:32]}"
    )
    visible = imports.visible_keys(archive.conn, project, session)
    found = archive.call(
        "preflight",
        {
            "project": project,
            "sessionId": session[: limits.MAX_SESSION_ID_CHARS],
            "messageKey": key[: limits.MAX_MESSAGE_KEY_CHARS],
            "text": prompt[: limits.PREFLIGHT_QUERY_CHARS],
            "excludeVisibleSourceKeys": visible,
        },
    )
    return found["modelVisibleText"] or None


def archive_session(archive: Any, host: str, event: dict[str, Any], env: dict[str, str]) -> importer.Summary | None:
    """Import the transcript the event names (only what changed since the last time)."""
    units = _units(host, event, env)
    if not units:
        return None
    project = env.get("CWA_PROJECT")
    return importer.import_sources(archive, host, units, project=project)


def _units(host: str, event: dict[str, Any], env: dict[str, str]) -> list[Any]:
    if host == "opencode":
        session = event.get("sessionID") or event.get("session_id")
        database = Path(event["database"]) if isinstance(event.get("database"), str) else opencode.default_root(env)
        if not isinstance(session, str) or not database.exists():
            return []
        return [u for u in opencode.units(database) if u.source.endswith(f"#{session}")]
    path = event.get("transcript_path")
    if host == "codex" and not isinstance(path, str):  # notify names the thread, not its file
        thread = event.get("thread-id")
        found = codex.find_rollout(codex.default_root(env), thread) if isinstance(thread, str) else None
        path = str(found) if found else None
    if not isinstance(path, str) or not Path(path).is_file():
        return []
    return (claude if host == "claude" else codex).units(Path(path))


def handle(archive: Any, host: str, event: dict[str, Any], env: dict[str, str]) -> dict[str, Any] | None:
    """The client's answer to print (None: print nothing)."""
    name = event_name(event)
    if name in PROMPT_EVENTS:
        text = hint(archive, host, event, env)
        if text is None:
            return None
        if host == "opencode":
            return {"hint": text}
        return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": text}}
    if name in ARCHIVE_EVENTS:
        archive_session(archive, host, event, env)
    return None


def answer_safely(
    archive: Callable[[], Any], db: Path, host: str, event: dict[str, Any], env: dict[str, str]
) -> dict[str, Any] | None:
    """`handle` on the archive `archive()` gives, never raising: a failure is logged beside the
    archive (cwa doctor shows it) and the client gets no answer."""
    try:
        return handle(archive(), host, event, env)
    except Exception as exc:
        log_failure(db, host, event_name(event), exc)
        return None


def log_failure(db: Path, host: str, event: Any, exc: BaseException) -> None:
    if isinstance(exc, CwaError):
        hook_failures.failed(db, host, event, exc.code, exc.message)
    else:
        hook_failures.failed(db, host, event, "internal", f"{type(exc).__name__}: {exc}")
