"""Hook installation (`cwa hooks install|uninstall`), the hook client and its server, and what a
hook answers: a hint in the client's format, never what the client still shows, never a failure
the client sees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from capture_fixtures import ClaudeSession
from conftest import hermetic_env, run_cwa, stop_hook_servers

from cwa import hook_failures
from cwa.api import Archive
from cwa.errors import InvalidRequest
from cwa.integrations import hook_config


@pytest.fixture(autouse=True)
def no_hook_server_left(tmp_path):
    yield
    stop_hook_servers(tmp_path)


def _hook_commands(settings: Path) -> list[str]:
    data = json.loads(settings.read_text())
    return [h["command"] for groups in data.get("hooks", {}).values() for g in groups for h in g["hooks"]]


def test_claude_hooks_are_added_once_beside_the_users_and_removed_exactly(tmp_path):
    env = {"HOME": str(tmp_path / "home")}
    db = tmp_path / "a.db"
    settings = tmp_path / "home" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    mine = {"hooks": [{"type": "command", "command": "my-linter"}]}
    settings.write_text(json.dumps({"model": "opus", "hooks": {"Stop": [mine], "PreToolUse": [mine]}}))

    printed = hook_config.install("claude", None, env, db, write=False)
    assert printed["changes"][0]["changed"] is True and "my-linter" in settings.read_text()
    assert "hook_client" not in settings.read_text()  # without --write nothing changes

    hook_config.install("claude", None, env, db, write=True)
    assert hook_config.install("claude", None, env, db, write=True)["changes"][0]["changed"] is False
    data = json.loads(settings.read_text())
    assert data["model"] == "opus" and data["hooks"]["PreToolUse"] == [mine]
    ours = [c for c in _hook_commands(settings) if "hook_client" in c]
    assert len(ours) == len(hook_config.CLAUDE_EVENTS)
    assert ours[0] == f"{sys.executable} -P -m cwa.hook_client --db {db} claude"  # the archive is named
    assert data["hooks"]["Stop"][0] == mine  # the user's hook first, as it was

    hook_config.uninstall("claude", None, env, db, write=True)
    assert json.loads(settings.read_text()) == {"model": "opus", "hooks": {"Stop": [mine], "PreToolUse": [mine]}}

    settings.write_text("{broken")
    with pytest.raises(InvalidRequest):
        hook_config.install("claude", None, env, db, write=True)
    assert settings.read_text() == "{broken"


def test_codex_gets_notify_unless_the_user_has_one_and_a_prompt_hook(tmp_path):
    env = {"HOME": str(tmp_path), "CODEX_HOME": str(tmp_path / "codex")}
    db = tmp_path / "a.db"
    config = tmp_path / "codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('model = "m"\n\n[profiles.x]\nmodel = "y"\n')
    hook_config.install("codex", None, env, db, write=True)
    import tomllib

    data = tomllib.loads(config.read_text())
    assert data["notify"] == [sys.executable, "-P", "-m", "cwa.hook_client", "--db", str(db), "codex"]
    assert data["model"] == "m" and data["profiles"] == {"x": {"model": "y"}}
    hooks = json.loads((tmp_path / "codex" / "hooks.json").read_text())["hooks"]
    assert list(hooks) == ["UserPromptSubmit"]
    hook_config.uninstall("codex", None, env, db, write=True)
    assert "notify" not in tomllib.loads(config.read_text()) and tomllib.loads(config.read_text())["model"] == "m"

    config.write_text('notify = ["my-notifier"]\n')
    result = hook_config.install("codex", None, env, db, write=True)
    assert tomllib.loads(config.read_text())["notify"] == ["my-notifier"]  # the user's program stays
    assert set(json.loads((tmp_path / "codex" / "hooks.json").read_text())["hooks"]) == {"UserPromptSubmit", "Stop"}
    assert any("my-notifier" in note for note in result["notes"])

    config.write_text("notify = [broken\n")
    with pytest.raises(InvalidRequest):
        hook_config.install("codex", None, env, db, write=True)
    with pytest.raises(InvalidRequest):
        hook_config.install("codex", tmp_path, env, db, write=True)  # no --project for Codex


def test_opencode_plugin_names_the_hook_client_and_is_removed(tmp_path):
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    db = tmp_path / "a.db"
    hook_config.install("opencode", tmp_path / "project", env, db, write=True)
    plugin = tmp_path / "project" / ".opencode" / "plugin" / "cwa.ts"
    assert (
        json.dumps([sys.executable, "-P", "-m", "cwa.hook_client", "--db", str(db), "opencode"]) in plugin.read_text()
    )
    hook_config.uninstall("opencode", tmp_path / "project", env, db, write=True)
    assert not plugin.exists()
    hook_config.install("opencode", None, env, db, write=True)
    assert (tmp_path / "cfg" / "opencode" / "plugin" / "cwa.ts").exists()


def _client(db: Path, event: dict, env: dict, host: str = "claude") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cwa.hook_client", "--db", str(db), host],
        input=json.dumps(event).encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )


def _stop_servers(db: Path) -> None:
    subprocess.run(["pkill", "-f", "--", f"--db {db} hook-server"], check=False)


def test_a_session_is_archived_and_hinted_but_never_with_what_the_client_still_shows(tmp_path):
    env = hermetic_env(tmp_path) | {"XDG_RUNTIME_DIR": str(tmp_path / "run")}
    (tmp_path / "run").mkdir()
    db = tmp_path / "a.db"
    project = tmp_path / "project"
    project.mkdir()
    old = ClaudeSession(tmp_path / "home", project, "old-session")
    old.write(
        *old.turn("the nightly export fails", "cat export.log", "EXPORT-5151: quota exceeded on bucket q9", "Quota.")
    )
    live = ClaudeSession(tmp_path / "home", project, "live-session", minute=60)
    live.write(*live.turn("check the importer", "cat import.log", "IMPORT-6262: schema drift in table t4", "Drift."))
    try:
        for session in (old, live):
            stop = {
                "session_id": session.session,
                "transcript_path": str(session.path),
                "cwd": str(project),
                "hook_event_name": "Stop",
            }
            done = _client(db, stop, env)
            assert done.returncode == 0 and done.stdout == b""
        with Archive.open(db) as archive:
            assert archive.search({"query": "EXPORT-5151", "project": str(project)})["results"]

        def ask(prompt: str, prompt_id: str) -> str:
            event = {
                "session_id": live.session,
                "transcript_path": str(live.path),
                "cwd": str(project),
                "hook_event_name": "UserPromptSubmit",
                "prompt": prompt,
                "prompt_id": prompt_id,
            }
            done = _client(db, event, env)
            assert done.returncode == 0
            return done.stdout.decode()

        hinted = ask("Remind me: what was EXPORT-5151 about?", "p1")
        answer = json.loads(hinted)["hookSpecificOutput"]
        assert answer["hookEventName"] == "UserPromptSubmit" and "EXPORT-5151" in answer["additionalContext"]
        assert answer["additionalContext"].lstrip().startswith("[cwa archive, ")  # preflight's bytes, as frozen
        assert ask("Remind me: what was EXPORT-5151 about?", "p1") == hinted  # frozen per prompt
        # the live session's own turn is still in the client's context: not hinted back
        again = ask("Remind me: what was IMPORT-6262 about?", "p2")
        assert "IMPORT-6262" not in again
    finally:
        _stop_servers(db)


def test_the_hook_client_never_fails_its_client_and_doctor_names_the_failure(tmp_path):
    env = hermetic_env(tmp_path) | {"XDG_RUNTIME_DIR": str(tmp_path / "run")}
    (tmp_path / "run").mkdir()
    db = tmp_path / "a.db"
    db.write_bytes(b"not a database\n" * 50)
    event = {"session_id": "s", "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit", "prompt": "hello"}
    try:
        for raw in (json.dumps(event).encode(), b"{not json", b"[]"):
            done = subprocess.run(
                [sys.executable, "-m", "cwa.hook_client", "--db", str(db), "claude"],
                input=raw,
                capture_output=True,
                env=env,
                timeout=60,
            )
            assert done.returncode == 0 and done.stdout == b""
        done = run_cwa(["--db", str(db), "hook", "claude"], env, stdin=json.dumps(event).encode())
        assert done.returncode == 0 and done.stdout == b""
        codes = [entry["code"] for entry in hook_failures.recent(db)]
        assert codes.count("archive-incompatible") == 2 and "hook-unanswered" in codes
    finally:
        _stop_servers(db)
    db.unlink()
    with Archive.open(db):
        pass
    report = json.loads(run_cwa(["--db", str(db), "doctor", "--json"], env).stdout)
    hooks = next(c for c in report["checks"] if c["name"] == "hooks")
    assert hooks["ok"] is False and "archive-incompatible" in hooks["detail"] and hooks["repairable"] is True
    repaired = run_cwa(["--db", str(db), "doctor", "--repair", "--json"], env)
    assert repaired.returncode == 0 and hook_failures.recent(db) == []


def test_hooks_failing_side_by_side_lose_none_of_their_lines(tmp_path):
    """Eight processes log 40 failures each at once: every line is kept, whole, and once the file
    is cut back the newest MAX_LINES are what is read."""
    db = tmp_path / "a.db"
    writer = (
        "import sys\nfrom pathlib import Path\nfrom cwa import hook_failures\n"
        "for n in range(40):\n"
        "    hook_failures.failed(Path(sys.argv[1]), 'claude', 'Stop', 'internal', sys.argv[2] + ':' + str(n) + 'x' * 600)\n"
    )
    writers = [subprocess.Popen([sys.executable, "-c", writer, str(db), str(w)]) for w in range(8)]
    assert all(p.wait(timeout=60) == 0 for p in writers)
    lines = hook_failures.log_path(db).read_bytes().splitlines()
    assert len(lines) == 320 and all(json.loads(line)["code"] == "internal" for line in lines)
    assert {json.loads(line)["message"].rstrip("x") for line in lines} == {
        f"{w}:{n}" for w in range(8) for n in range(40)
    }
    assert len(hook_failures.recent(db)) == hook_failures.MAX_LINES
    for n in range(200):  # past TRIM_BYTES: cut back to the newest lines, the last one among them
        hook_failures.failed(db, "codex", None, "internal", f"late {n}" + "x" * 600)
    assert len(hook_failures.log_path(db).read_bytes().splitlines()) <= 2 * hook_failures.MAX_LINES
    assert hook_failures.recent(db)[-1]["message"].startswith("late 199")


def test_the_server_is_alone_per_archive_and_leaves_when_idle(tmp_path):
    env = hermetic_env(tmp_path)
    db = tmp_path / "a.db"
    socket = tmp_path / "hooks.sock"
    command = [sys.executable, "-m", "cwa", "--db", str(db), "hook-server", "--socket", str(socket), "--idle", "2"]
    first = subprocess.Popen(command, env=env)
    deadline = time.monotonic() + 30
    while not socket.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert socket.exists() and oct(os.stat(socket).st_mode & 0o777) == "0o600"
    second = subprocess.run(command, env=env, timeout=30)  # the lock is held: it leaves at once
    assert second.returncode == 0 and first.poll() is None
    assert first.wait(timeout=30) == 0 and not socket.exists()  # idle: gone, socket removed
