"""The Pi extension against a real Pi 1.6.0 process (RPC mode, the faux model, no network)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from blake3 import blake3
from pi_host import CWA, FAUX, Pi, children, pi_env, pi_installed, serve_processes

from cwa import routing
from cwa.api import Archive
from cwa.tokens import estimate_tokens


@pytest.fixture(autouse=True, scope="module")
def pi_present() -> None:
    if not pi_installed():  # a failure, not a skip: these tests are how the extension is checked
        pytest.fail("Pi 1.6.0 and Node 22 are not installed in .cache/pi: run .ci/install-tools", pytrace=False)


def call(name: str, **arguments) -> str:
    return "CALL " + json.dumps({"name": name, "arguments": arguments})


def tool_end(events: list[dict], name: str) -> dict:
    ends = [e for e in events if e.get("type") == "tool_execution_end" and e.get("toolName") == name]
    assert ends, f"no {name} call in the turn"
    return ends[-1]


def test_launch_is_clean_and_leaves_no_serve_process(tmp_path: Path) -> None:
    env = pi_env(tmp_path)
    pi = Pi(tmp_path, env)
    try:
        state = pi.command("get_state")
        assert state["success"] is True and state["data"]["model"]["id"] == "faux-1"
        pi.prompt("hello there")
        assert children(pi.process.pid), "the extension started its cwa serve child"
        assert serve_processes(Path(env["CWA_DB"])), "this test's serve child is found by its archive"
    finally:
        code = pi.close()
    assert code == 0
    assert pi.stderr == b"", pi.stderr.decode(errors="replace")
    time.sleep(0.2)  # only this test's children count: other cwa serve processes may run meanwhile
    assert serve_processes(Path(env["CWA_DB"])) == [], "a cwa serve process was left behind"


def test_rotation_search_and_recall_through_real_pi(tmp_path: Path) -> None:
    env = pi_env(tmp_path, CWA_ROTATION_TURNS="2", CWA_RETAIN_TURNS="1")
    pi = Pi(tmp_path, env)
    sentinel = "zebra-striped-sentinel-ALPHA"
    try:
        pi.prompt(f"first topic: the {sentinel} setting lives in config/alpha.cfg and must stay at 7")
        pi.prompt("second topic: the release train leaves on thursday")
        pi.prompt("third topic: nothing about the first one")
        # the epoch held two user messages: the third rotated the first group out
        last = json.dumps(pi.requests()[-1])
        assert sentinel not in last
        assert "release train" in last
        with Archive.open(tmp_path / "archive.db") as archive:
            stored = archive.conn.execute(
                "SELECT count(*) FROM documents WHERE kind = 'turn' AND state = 'live'"
            ).fetchone()[0]
            assert stored >= 1
        events = pi.prompt(call("context_window_search", query=sentinel))
        found = tool_end(events, "context_window_search")
        assert not found["isError"], found
        results = found["result"]["details"]["results"]
        assert results and sentinel in results[0]["snippet"]
        locator = results[0]["locator"]
        assert locator in found["result"]["content"][0]["text"]
        events = pi.prompt(call("context_recall", locator=locator, maxTokens=4000))
        recalled = tool_end(events, "context_recall")["result"]
        assert recalled["details"]["status"] == "resolved"
        exact = recalled["details"]["text"]
        assert f"first topic: the {sentinel} setting lives in config/alpha.cfg and must stay at 7" in exact
        # what the model reads is the same bytes, JSON-quoted under a historical label
        assert json.dumps(exact)[1:-1] in recalled["content"][0]["text"]
    finally:
        assert pi.close() == 0
    assert pi.stderr == b""


OVERSIZED_SENTINEL = "MIDDLE-SENTINEL-0x5EED"


def oversized_message() -> str:
    """About 20K tokens of text (> maxInlineUserTokens, 16K) with a sentinel in the middle."""
    filler = " ".join(f"line {i} of the pasted build log: step ok" for i in range(1000))
    return f"please look at this log\n{filler}\n{OVERSIZED_SENTINEL}\n{filler}\nwhat failed?"


def test_oversized_input_is_archived_and_never_sent(tmp_path: Path) -> None:
    pi = Pi(tmp_path, pi_env(tmp_path))
    text = oversized_message()
    assert estimate_tokens(text) > 16_000
    try:
        pi.prompt(text)
        pi.prompt("and the next step?")
    finally:
        assert pi.close() == 0
    requests = pi.requests()
    assert len(requests) >= 2
    assert all(OVERSIZED_SENTINEL not in json.dumps(r) for r in requests)
    assert "please look at this log" in json.dumps(requests[0])  # the preview's head
    with Archive.open(tmp_path / "archive.db") as archive:
        found = archive.call("search", {"query": OVERSIZED_SENTINEL, "project": str((tmp_path / "work").resolve())})
        assert found["results"], "the archive holds the sentinel"
        root = archive.conn.execute("SELECT document_id FROM documents WHERE kind = 'checkpoint-root'").fetchone()[0]
        assert archive.get({"documentId": root})["text"] == text


def test_oversized_input_that_cannot_be_archived_aborts_the_turn(tmp_path: Path) -> None:
    # a disk guard above any disk's free space: every archive write is refused (disk-low)
    pi = Pi(tmp_path, pi_env(tmp_path, CWA_DISK_CRITICAL_MEBIBYTES=str(1 << 30)))
    try:
        events = pi.prompt(oversized_message())
    finally:
        assert pi.close() == 0
    assert all(OVERSIZED_SENTINEL not in json.dumps(r) for r in pi.requests())
    settled = [e for e in events if e.get("type") == "agent_settled"][-1]
    assert settled["aborted"] is True
    assert any("aborted" in s for s in pi.statuses())
    assert any("could not be archived" in n and len(n) < 1000 for n in pi.notices())


def middle_sentinel_turn(number: int) -> str:
    words = " ".join(f"detail{k}" for k in range(200))
    return f"turn {number} notes: {words} COMPACT-SENTINEL-{number} {words} end of turn {number}"


def compaction_settings(root: Path) -> None:
    """Keep little after a compaction, so a few short turns give Pi something to compact."""
    agent = root / "home" / ".pi" / "agent"
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "settings.json").write_text(json.dumps({"compaction": {"keepRecentTokens": 50}}))


def test_compaction_returns_the_signed_catalog_without_archived_text(tmp_path: Path) -> None:
    env = pi_env(tmp_path)
    compaction_settings(tmp_path)
    pi = Pi(tmp_path, env)
    try:
        pi.prompt(oversized_message())
        for number in range(1, 4):
            pi.prompt(middle_sentinel_turn(number))
        answer = pi.command("compact")
        assert answer["success"] is True, answer
        result = answer["data"]
        summary = result["summary"]
        assert "cwa checkpoint catalog" in summary
        assert estimate_tokens(summary) <= 1000
        assert OVERSIZED_SENTINEL not in json.dumps(result)
        assert "COMPACT-SENTINEL" not in json.dumps(result)
        entries = result["details"]["cwa"]["entries"]
        assert entries and result["details"]["fileOps"] == {"read": [], "written": [], "edited": []}
        pi.prompt("after the compaction")
        after = json.dumps(pi.requests()[-1])
        assert "cwa checkpoint catalog" in after and "COMPACT-SENTINEL-1" not in after
    finally:
        assert pi.close() == 0
    with Archive.open(tmp_path / "archive.db") as archive:
        for entry in entries:  # each catalog entry names an exact archived source
            text = archive.get({"documentId": entry["rootId"], "version": entry["version"]})["text"]
            assert blake3(text.encode()).hexdigest() == entry["blake3"]
        found = archive.call("search", {"query": "COMPACT-SENTINEL-1", "project": str((tmp_path / "work").resolve())})
        assert found["results"]


def test_compaction_is_cancelled_when_checkpointing_fails(tmp_path: Path) -> None:
    compaction_settings(tmp_path)
    pi = Pi(tmp_path, pi_env(tmp_path, CWA_DISK_CRITICAL_MEBIBYTES=str(1 << 30)))
    try:
        for number in range(1, 4):
            pi.prompt(middle_sentinel_turn(number))
        answer = pi.command("compact")
        assert answer["success"] is False
        assert "cancel" in json.dumps(answer).lower()
        assert any("compaction cancelled" in n for n in pi.notices())
        entries = pi.command("get_entries")
        assert not any(e.get("type") == "compaction" for e in entries["data"]["entries"])
    finally:
        assert pi.close() == 0


def serve_wrapper(root: Path, works: bool) -> Path:
    """The `cwa` command the extension runs: the real one, or one that fails at once."""
    wrapper = root / "cwa-wrapper"
    body = f'exec "{CWA}" "$@"' if works else "echo 'cwa: broken install' >&2; exit 3"
    wrapper.write_text(f"#!/bin/sh\n{body}\n")
    wrapper.chmod(0o755)
    return wrapper


def test_a_killed_serve_child_is_restarted_once_then_cwa_steps_aside(tmp_path: Path) -> None:
    wrapper = serve_wrapper(tmp_path, works=True)
    pi = Pi(tmp_path, pi_env(tmp_path, CWA_EXECUTABLE=str(wrapper)))
    try:
        pi.prompt("first message before the crash")
        first = children(pi.process.pid)
        assert len(first) == 1
        os.kill(first[0], signal.SIGKILL)
        events = pi.prompt("second message after the crash")
        assert [e for e in events if e.get("type") == "agent_settled"][-1]["aborted"] is False
        second = children(pi.process.pid)
        assert len(second) == 1 and second != first, "restarted"
        assert "second message after the crash" in json.dumps(pi.requests()[-1])
        assert pi.statuses()[-1].startswith("Epoch ")
        # the restart was the one allowed: now the command itself fails, and cwa steps aside
        serve_wrapper(tmp_path, works=False)
        os.kill(second[0], signal.SIGKILL)
        events = pi.prompt("third message, cwa is gone")
        assert [e for e in events if e.get("type") == "agent_settled"][-1]["aborted"] is False
        assert "third message, cwa is gone" in json.dumps(pi.requests()[-1])
        assert any(s.startswith("cwa off:") for s in pi.statuses())
        assert any("Messages pass through unchanged" in n for n in pi.notices())
        events = pi.prompt("fourth message still works")
        assert "fourth message still works" in json.dumps(pi.requests()[-1])
    finally:
        assert pi.close() == 0


def test_window_command_shows_status_searches_and_redacts_with_a_confirm_token(tmp_path: Path) -> None:
    pi = Pi(tmp_path, pi_env(tmp_path, CWA_RETAIN_TURNS="1"))
    try:
        pi.prompt("the flaky test lives in tests/test_retry.py and fails with ETIMEDOUT")
        pi.prompt("second turn, so the first one is complete")
        status = pi.window()
        assert "Epoch 1 · 2/20 turns · ~" in status and str(tmp_path / "archive.db") in status
        assert "storage (this project): 2 document(s) (2 live)" in status
        assert "context round trip: p50" in status
        found = pi.window("search ETIMEDOUT")
        assert found.startswith("1. doc-") and "ETIMEDOUT" in found
        first = found.split()[1]
        retired = pi.window(f"supersede {first}")
        assert retired.startswith(f"{first} superseded by doc-")
        assert "ETIMEDOUT" not in pi.window("search ETIMEDOUT")
        assert pi.window("recall why").startswith("last preflight: ")
        assert "rotation queued" in pi.window("rotate")
        pi.prompt("third turn rotates now")
        assert pi.statuses()[-1].startswith("Epoch 2 ")
        archive = pi.window("archive status")
        assert "by retention class" in archive and "conversation:" in archive
        assert pi.window("archive prune").startswith("maintenance pass: ")
        asked = pi.window("archive redact session")
        token = asked.rsplit(" ", 1)[1]
        assert "would be tombstoned" in asked and token.startswith("redact-")
        assert "document(s) redacted" in pi.window(f"archive redact session {token}")
        assert pi.window("search ETIMEDOUT") == "no results"
        assert "1 rotation(s) in this run" in pi.window("status")
        assert pi.window("frobnicate").startswith("usage: /window")
        assert pi.window("supersede doc-unknown because").startswith("cwa: not-found")
        # a smaller model: the footer shows its limits at once, without waiting for a message
        assert pi.command("set_model", provider="faux", modelId="faux-small")["success"]
        if not pi.statuses()[-1].endswith("/18K tokens"):  # 0.65 × (32,000 − 4,096)
            pi.wait_for(lambda line: (line.get("statusText") or "").endswith("/18K tokens"), 30)
    finally:
        assert pi.close() == 0
    assert pi.stderr == b""


def offered(messages: list[dict]) -> tuple[set[str], str]:
    """The tools and the system prompt a provider request offers: its system messages replayed."""
    tools: set[str] = set()
    prompt = []
    for message in messages:
        if message.get("role") == "system":
            tools |= {tool["name"] for tool in message.get("toolsAdded", [])}
            tools -= {tool["name"] for tool in message.get("toolsRemoved", [])}
            content = message.get("content")
            prompt.append(content if isinstance(content, str) else "".join(b.get("text", "") for b in content or []))
            prompt += [text for text in (message.get("sections") or {}).values() if text]
    return tools, "\n".join(prompt)


def test_tools_gather_traverse_archive_and_supersede(tmp_path: Path) -> None:
    env = pi_env(tmp_path, CWA_ROTATION_TURNS="2", CWA_RETAIN_TURNS="1")
    pi = Pi(tmp_path, env)
    try:
        pi.prompt("we decided to keep the retry budget at 5 attempts for the payment-gateway client")
        pi.prompt("then we tried exponential backoff with jitter on payment-gateway and it worked")
        pi.prompt("unrelated: update the changelog")
        # the model is offered exactly the tools routing.json gives Pi, and the routing guidelines
        tools, prompt = offered(pi.requests()[-1])
        assert sorted(t for t in tools if t.startswith("context_")) == sorted(routing.tool_names("pi"))
        assert all(line in prompt for line in routing.guidance()["guidelines"])
        events = pi.prompt(call("context_window_gather", query="payment-gateway retry budget"))
        gathered = tool_end(events, "context_window_gather")["result"]
        assert "[cwa archive | " in gathered["content"][0]["text"]
        assert any("retry budget at 5 attempts" in item["text"] for item in gathered["details"]["items"])
        first = gathered["details"]["items"][0]
        events = pi.prompt(call("context_window_traverse", documentId=first["documentId"], direction="after"))
        page = tool_end(events, "context_window_traverse")["result"]
        assert page["details"]["status"] == "ok" and page["details"]["records"]

        events = pi.prompt(
            call(
                "context_window_archive",
                text="Convention: payment retries stop after 5 attempts.",
                type="convention",
                subjectKey="payment-retries",
            )
        )
        kept = tool_end(events, "context_window_archive")["result"]["details"]
        events = pi.prompt(
            call(
                "context_window_archive",
                text="Convention: payment retries stop after 3 attempts.",
                type="convention",
                subjectKey="payment-retries",
            )
        )
        replaced = tool_end(events, "context_window_archive")["result"]["details"]
        assert replaced["documentId"] == kept["documentId"] and replaced["version"] == kept["version"] + 1

        events = pi.prompt(
            call(
                "context_window_supersede",
                documentId=first["documentId"],
                note="The retry budget is now 3 attempts (see payment-retries).",
            )
        )
        retired = tool_end(events, "context_window_supersede")["result"]
        assert not retired.get("isError"), retired
        events = pi.prompt(call("context_recall", documentId="doc-does-not-exist"))
        assert "missing" in tool_end(events, "context_recall")["result"]["content"][0]["text"]
        events = pi.prompt(call("context_recall"))  # neither locator nor id: a typed tool error
        failed = tool_end(events, "context_recall")
        assert failed["isError"] and "invalid-request" in failed["result"]["content"][0]["text"]
    finally:
        assert pi.close() == 0
    with Archive.open(tmp_path / "archive.db") as archive:
        states = dict(
            archive.conn.execute(
                "SELECT document_id || ' v' || version, state FROM documents WHERE kind = 'manual'"
            ).fetchall()
        )
        assert states == {f"{kept['documentId']} v1": "superseded", f"{kept['documentId']} v2": "live"}
        row = archive.conn.execute(
            "SELECT state FROM documents WHERE document_id = ? ORDER BY version DESC", (first["documentId"],)
        ).fetchone()
        assert row[0] == "superseded"


def test_a_new_session_records_its_verified_parent_lineage(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    pi = Pi(tmp_path, pi_env(tmp_path), args=("--session-dir", str(sessions)))
    try:
        pi.prompt("parent session message")
        parent_file = pi.command("get_state")["data"]["sessionFile"]
        parent_id = pi.command("get_state")["data"]["sessionId"]
        assert pi.command("new_session", parentSession=parent_file)["success"]
        pi.prompt("child session message")
        child_id = pi.command("get_state")["data"]["sessionId"]
        assert child_id != parent_id
    finally:
        assert pi.close() == 0
    with Archive.open(tmp_path / "archive.db") as archive:
        rows = dict(
            archive.conn.execute(
                "SELECT s.session_key, p.session_key FROM sessions s LEFT JOIN sessions p ON s.parent_id = p.id"
            )
        )
    assert rows[child_id] == parent_id and rows[parent_id] is None


def test_cwa_pi_install_and_uninstall_drive_what_pi_loads(tmp_path: Path) -> None:
    env = pi_env(tmp_path)
    path = subprocess.run([str(CWA), "pi", "path"], env=env, capture_output=True, check=True).stdout.decode().strip()
    assert Path(path).is_file() and path.endswith("cwa/integrations/pi/extension.ts")
    installed = subprocess.run([str(CWA), "pi", "install", "--json"], env=env, capture_output=True, check=True)
    assert json.loads(installed.stdout)["changed"] is True
    again = subprocess.run([str(CWA), "pi", "install", "--json"], env=env, capture_output=True, check=True)
    assert json.loads(again.stdout)["changed"] is False
    settings = json.loads((tmp_path / "home" / ".pi" / "agent" / "settings.json").read_text())
    assert settings["extensions"] == [path]

    pi = Pi(tmp_path, env, extensions=(FAUX,), discover=True)
    try:
        pi.prompt("hello from an installed extension")
        assert pi.statuses() and pi.statuses()[-1].startswith("Epoch 1 ")
    finally:
        assert pi.close() == 0
    assert pi.stderr == b""

    subprocess.run([str(CWA), "pi", "uninstall"], env=env, capture_output=True, check=True)
    assert json.loads((tmp_path / "home" / ".pi" / "agent" / "settings.json").read_text())["extensions"] == []
    pi = Pi(tmp_path, env, extensions=(FAUX,), discover=True)
    try:
        pi.prompt("hello without it")
        assert pi.statuses() == []
    finally:
        assert pi.close() == 0


def test_the_model_sees_the_routing_guidance_and_a_labelled_hint_in_a_later_session(tmp_path: Path) -> None:
    pi = Pi(tmp_path, pi_env(tmp_path), args=("--session-dir", str(tmp_path / "sessions")))
    try:
        pi.prompt(
            "The nightly export to the warehouse fails with ERR_QUOTA_EXCEEDED when the batch is larger "
            "than 4096 rows; we fixed it by chunking in exporter/batch.py."
        )
        pi.prompt("ok thanks")
        assert pi.command("new_session")["success"]
        pi.prompt("the nightly export fails again with ERR_QUOTA_EXCEEDED, what did we do last time?")
    finally:
        assert pi.close() == 0
    request = pi.requests()[-1]
    system = json.dumps([m for m in request if m["role"] == "system"])
    for line in routing.guidance()["guidelines"]:
        assert json.dumps(line)[1:-1] in system
    question = next(
        i for i, m in enumerate(request) if m["role"] == "user" and "what did we do last time" in json.dumps(m)
    )
    hint = request[question + 1]
    text = hint["content"][0]["text"] if isinstance(hint["content"], list) else hint["content"]
    assert text.startswith("\n\n[cwa archive, ") and "historical evidence, may be outdated" in text
    assert "chunking in exporter/batch.py" in text


def test_parts_turn_off_as_docs_pi_md_says(tmp_path: Path) -> None:
    agent = tmp_path / "home" / ".pi" / "agent"
    agent.mkdir(parents=True)
    (agent / "settings.json").write_text(json.dumps({"cwa": {"hintBudgetTokens": 0}}))
    pi = Pi(
        tmp_path, pi_env(tmp_path), args=("--session-dir", str(tmp_path / "sessions"), "--exclude-tools", "context_*")
    )
    try:
        pi.prompt("The nightly export fails with ERR_QUOTA_EXCEEDED above 4096 rows; we chunk in exporter/batch.py.")
        pi.prompt("ok thanks")
        assert pi.command("new_session")["success"]
        pi.prompt("the nightly export fails again with ERR_QUOTA_EXCEEDED, what did we do last time?")
    finally:
        assert pi.close() == 0
    request = json.dumps(pi.requests()[-1])
    assert "context_window_gather" not in request and "context_recall" not in request  # no cwa tools
    assert "[cwa archive, " not in request and "continuity marker" not in request  # no hint
    assert pi.statuses()[-1].startswith("Epoch 1 ")  # the window engine itself still runs
