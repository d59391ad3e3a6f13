"""Claude Code, Codex and OpenCode, real and offline (tests/hosts/): after `cwa hooks install`, a
scripted session with a tool call is archived (searchable, its output exact); a later session's
model request carries cwa's labelled hint; cwa's MCP tools, called by the client, find the
earlier session; and a broken cwa leaves the client working, its failure shown by `cwa doctor`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_cwa, stop_hook_servers
from hosts import clients
from hosts.faux_models import FauxModels, Script

from cwa import hook_failures
from cwa.api import Archive

OUTPUT = "deploy log: ZX-4471 billing migration lock timeout at step 7"
ASK = "what was the ZX-4471 billing migration error about?"
LABEL = "[cwa "


def _search(db: Path, query: str, project: Path) -> list[dict]:
    with Archive.open(db) as archive:
        return archive.search({"query": query, "project": os.path.realpath(project)})["results"]


def _wait_for(db: Path, query: str, project: Path, seconds: float = 30) -> list[dict]:
    """Codex runs its notify program after the turn, without waiting for it."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if db.exists() and (found := _search(db, query, project)):
            return found
        time.sleep(0.25)
    return []


def _exact(db: Path, document_id: str) -> str:
    with Archive.open(db) as archive:
        return archive.get({"documentId": document_id})["text"]


def _texts(value) -> str:
    return json.dumps(value)


@pytest.fixture(autouse=True)
def no_hook_server_left(tmp_path):
    yield
    stop_hook_servers(tmp_path)


@pytest.fixture
def place(tmp_path: Path):
    project = tmp_path / "work" / "billing"
    project.mkdir(parents=True)
    return tmp_path / "home", project, tmp_path / "archive" / "a.db"


def _kill_hook_server(db: Path) -> int:
    """SIGKILL the archive's hook server (as a crash would); how many were killed."""
    found = subprocess.run(
        ["pgrep", "-f", "--", f"--db {db} hook-server"], capture_output=True, text=True
    ).stdout.split()
    for pid in found:
        os.kill(int(pid), signal.SIGKILL)
    return len(found)


def _wait_for_failure_log(db: Path, code: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not any(f.get("code") == code for f in hook_failures.recent(db)):
        time.sleep(0.1)


def _wait_for_hooks_done(db: Path, seconds: float = 60) -> None:
    """Until no hook of this archive is running: Codex's notify hook may outlive its client, and one
    still running while the test moves the archive's files would write to them half moved."""
    deadline = time.monotonic() + seconds
    pattern = f"cwa.hook_client --db {db} "
    while (
        time.monotonic() < deadline
        and subprocess.run(["pgrep", "-f", "--", pattern], capture_output=True).returncode == 0
    ):
        time.sleep(0.1)


def _break_and_check(db: Path, env: dict, run_client) -> None:
    """cwa killed, then an archive that is no longer a database: the client answers as before; the
    failure is logged beside the archive and `cwa doctor` names it once the archive is back."""
    assert _kill_hook_server(db) == 1
    assert "Done." in run_client()  # a new server starts
    _wait_for_hooks_done(db)  # none of them writing to the files about to be moved
    files = [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
    for path in files:
        if path.exists():
            path.rename(path.with_name("aside-" + path.name))
    db.write_bytes(b"this is not an SQLite database\n" * 100)
    try:
        assert "Done." in run_client()
        _wait_for_failure_log(db, "archive-incompatible")  # Codex's notify hook may run after the client exits
        _wait_for_hooks_done(db)
    finally:
        db.unlink()
        for path in files:
            if path.with_name("aside-" + path.name).exists():
                path.with_name("aside-" + path.name).rename(path)
    done = run_cwa(["--db", str(db), "doctor", "--json"], env)
    report = json.loads(done.stdout)
    hooks = next(c for c in report["checks"] if c["name"] == "hooks")
    assert done.returncode == 1 and hooks["ok"] is False and "archive-incompatible" in hooks["detail"], hooks
    assert run_cwa(["--db", str(db), "doctor", "--repair", "--json"], env).returncode == 0
    _kill_hook_server(db)


def test_claude_code(place):
    home, project, db = place
    claude = str(clients.client("claude"))
    with FauxModels(Script(command=f"echo '{OUTPUT}'")) as server:
        env = clients.environment(home, server.url)
        assert run_cwa(["--db", str(db), "hooks", "install", "claude", "--write"], env).returncode == 0
        installed = run_cwa(["--db", str(db), "mcp", "install", "claude", "--scope", "user", "--write"], env)
        assert installed.returncode == 0, installed.stderr

        first = clients.run(
            [claude, "-p", "The deploy failed with error ZX-4471", "--allowedTools", "Bash"], env, project
        )
        assert first.returncode == 0 and "Done." in first.stdout, first.stderr
        found = _search(db, "ZX-4471 billing migration lock timeout", project)
        assert found and found[0]["kind"] == "turn"
        assert OUTPUT in _exact(db, found[0]["documentId"])  # the tool's output, byte for byte
        earlier = found[0]["source"]["sessionId"]

        server.script.requests.clear()
        second = clients.run([claude, "-p", ASK, "--allowedTools", "Bash"], env, project)
        assert second.returncode == 0
        request = server.script.requests[0]["body"]["messages"]
        hints = [m for m in request if m["role"] == "system" and LABEL in _texts(m["content"])]
        assert hints and "ZX" in _texts(hints[0]["content"])  # a labelled hint, next to the user's prompt

        server.script.requests.clear()
        server.script.tool = ("context_window_search", {"query": "ZX-4471 lock timeout"})
        third = clients.run(
            [claude, "-p", "search the archive for ZX-4471", "--allowedTools", "mcp__cwa__context_window_search"],
            env,
            project,
        )
        assert third.returncode == 0, third.stderr
        results = [
            block
            for r in server.script.requests
            for m in r["body"]["messages"]
            if isinstance(m["content"], list)
            for block in m["content"]
            if block.get("type") == "tool_result"
        ]
        assert results and "step 7" in _texts(results) and earlier in _texts(results)
        server.script.tool = None

        _break_and_check(db, env, lambda: clients.run([claude, "-p", "still there?"], env, project).stdout)

        settings = home / ".claude" / "settings.json"
        gone = settings.read_text().replace(json.dumps(sys.executable)[1:-1], "/nonexistent/python3")
        settings.write_text(gone)  # cwa uninstalled under the client's feet
        assert "Done." in clients.run([claude, "-p", "and now?"], env, project).stdout
        assert run_cwa(["--db", str(db), "hooks", "uninstall", "claude", "--write"], env).returncode == 0
        assert "hooks" not in json.loads(settings.read_text())


def test_codex(place):
    home, project, db = place
    codex = str(clients.client("codex"))
    with FauxModels(Script(command=f"echo '{OUTPUT}'")) as server:
        env = clients.environment(home, server.url)
        clients.codex_config(home, server.url)
        installed = run_cwa(["--db", str(db), "hooks", "install", "codex", "--write"], env)
        assert installed.returncode == 0, installed.stderr
        config = home / ".codex" / "config.toml"  # a user's own key in cwa's entry, kept by the install
        config.write_text(config.read_text() + "\n[mcp_servers.cwa]\nstartup_timeout_sec = 60\n")
        assert run_cwa(["--db", str(db), "mcp", "install", "codex", "--write"], env).returncode == 0
        assert "startup_timeout_sec = 60" in config.read_text()

        def exec_(prompt: str, *extra: str):
            return clients.run([codex, "exec", "--skip-git-repo-check", *extra, prompt], env, project)

        first = exec_("The deploy failed with error ZX-4471")
        assert first.returncode == 0, first.stderr
        found = _wait_for(db, "ZX-4471 billing migration lock timeout", project)  # archived by notify
        assert found and OUTPUT in _exact(db, found[0]["documentId"])
        earlier, earlier_document = found[0]["source"]["sessionId"], found[0]["documentId"]

        server.script.requests.clear()
        # cwa's prompt hook runs once trusted; the flag stands for the user's trust
        second = exec_(ASK, "--dangerously-bypass-hook-trust")
        assert second.returncode == 0, second.stderr
        items = server.script.requests[0]["body"]["input"]
        hints = [i for i in items if i.get("role") == "developer" and LABEL in _texts(i.get("content"))]
        assert hints and "ZX" in _texts(hints[0])

        server.script.tool = ("context_window_search", {"query": "ZX-4471 lock timeout"})
        for _attempt in range(3):  # Codex may send its first request before a slow MCP server is up
            server.script.requests.clear()
            third = exec_("search the archive for ZX-4471")
            assert third.returncode == 0, third.stderr
            offered = [t.get("name") for t in server.script.requests[0]["body"].get("tools", [])]
            if "mcp__cwa" in offered:
                break
        assert "mcp__cwa" in offered, (offered, third.stderr[-3000:])
        outputs = [
            i for r in server.script.requests for i in r["body"]["input"] if i.get("type") == "function_call_output"
        ]
        # the earlier session's turn is among the hits (how much of each snippet shows depends on
        # how many hits share the budget: a retry above archives one more matching turn)
        assert outputs and earlier_document in _texts(outputs) and earlier in _texts(outputs)
        server.script.tool = None

        _break_and_check(db, env, lambda: exec_("still there?").stdout)


def test_opencode(place):
    home, project, db = place
    opencode = str(clients.client("opencode"))
    with FauxModels(Script(command=f"echo '{OUTPUT}'")) as server:
        env = clients.environment(home, server.url)
        clients.opencode_project(home, project, server.url)
        installed = run_cwa(["--db", str(db), "hooks", "install", "opencode", "--project", "--write"], env, cwd=project)
        assert installed.returncode == 0, installed.stderr
        assert run_cwa(["--db", str(db), "mcp", "install", "opencode", "--write"], env, cwd=project).returncode == 0

        def run_(*words: str):
            return clients.run([opencode, "run", *words], env, project, timeout=180)

        first = run_("The", "deploy", "failed", "with", "error", "ZX-4471")
        assert first.returncode == 0, first.stderr
        found = _search(db, "ZX-4471 billing migration lock timeout", project)
        assert found and OUTPUT in _exact(db, found[0]["documentId"])
        earlier = found[0]["source"]["sessionId"]

        server.script.requests.clear()
        second = run_(*ASK.split())
        assert second.returncode == 0, second.stderr
        turns = [r["body"] for r in server.script.requests if r["body"].get("tools")]
        users = [m for m in turns[0]["messages"] if m["role"] == "user"]
        assert LABEL in _texts(users[-1]) and "ZX" in _texts(users[-1])  # the hint joined the user's message

        server.script.requests.clear()
        server.script.tool = ("context_window_search", {"query": "ZX-4471 lock timeout"})
        third = run_("search", "the", "archive", "for", "ZX-4471")
        assert third.returncode == 0, third.stderr
        tools = [m for r in server.script.requests for m in r["body"].get("messages", []) if m["role"] == "tool"]
        assert tools and "step 7" in _texts(tools) and earlier in _texts(tools)
        server.script.tool = None

        _break_and_check(db, env, lambda: run_("still", "there?").stdout)
        shutil.rmtree(project / ".opencode" / "node_modules")
