"""The session engine through its hosts: `cwa serve` (deltas over a pipe) and `cwa session`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
from conftest import hermetic_env, run_cwa
from session_helpers import Transcript


def test_serve_carries_deltas_across_calls(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "cwa", "serve", "--no-background"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=hermetic_env(tmp_path, tmp_path / "a.db"),
    )

    def call(request_id: int, method: str, params: dict) -> dict:
        process.stdin.write(orjson.dumps({"id": request_id, "method": method, "params": params}) + b"\n")
        process.stdin.flush()
        reply = orjson.loads(process.stdout.readline())
        assert reply["id"] == request_id
        return reply

    transcript = Transcript()
    transcript.turn("where is the retry loop?", "In src/retry.py.")
    scope = {"project": "/work/p", "sessionId": "pi-1"}
    first = call(1, "session-context", {**scope, "messages": transcript.messages, "answer": "delta"})["result"]
    assert first["delta"]["keep"] == 0 and len(first["delta"]["append"]) == 2
    transcript.user("and the backoff?")
    second = call(
        2,
        "session-context",
        {**scope, "messages": transcript.messages[2:], "baseDigest": first["digest"], "answer": "delta"},
    )["result"]
    assert second["delta"]["keep"] == 2 and second["delta"]["append"][0]["content"] == "and the backoff?"
    stale = call(3, "session-context", {**scope, "messages": [], "baseDigest": first["digest"]})
    assert stale["error"]["code"] == "conflict" and stale["error"]["details"]["reason"] == "resync-required"
    settled = call(4, "session-settled", scope)["result"]
    assert settled["known"] is True and len(settled["archived"]) == 1
    status = call(5, "session-status", scope)["result"]
    assert status["inMemory"] is True and status["turns"] == 2 and status["level"] == "ok"
    assert call(6, "session-rotate", scope)["result"]["rotationQueued"] is True
    process.stdin.close()
    assert process.wait(timeout=60) == 0


def test_cli_replays_a_pi_session_file_and_reports_status(tmp_path):
    env = hermetic_env(tmp_path, tmp_path / "a.db")
    transcript = Transcript()
    transcript.turn("list the flaky tests", "tests/test_io.py::test_reconnect")
    transcript.user("fix it")
    transcript.tool("\n".join(f"trace line {n} in module_{n}" for n in range(2_000)))
    entries = [
        {"type": "session", "version": 3, "id": "sess-uuid", "timestamp": "2026-11-19T10:00:00Z", "cwd": str(tmp_path)}
    ]
    parent = None
    for number, message in enumerate(transcript.messages):
        entries.append(
            {
                "type": "message",
                "id": f"e{number}",
                "parentId": parent,
                "timestamp": "2026-11-19T10:00:00Z",
                "message": message,
            }
        )
        parent = f"e{number}"
    session_file = tmp_path / "session.jsonl"
    session_file.write_bytes(b"\n".join(orjson.dumps(e) for e in entries) + b"\n")

    replay = run_cwa(
        [
            "session",
            "replay",
            "--session",
            "pi-1",
            "--project",
            "/work/p",
            "--file",
            str(session_file),
            "--context-window",
            "200000",
            "--max-tokens",
            "8192",
        ],
        env,
    )
    assert replay.returncode == 0, replay.stderr.decode()
    out = replay.stdout.decode()
    assert "list the flaky tests" in out and "event: " in out and '"externalized"' in out
    assert "0/20 turns" not in out and "2/20 turns" in out
    as_json = run_cwa(
        ["session", "replay", "--session", "pi-1", "--project", "/work/p", "--file", str(session_file), "--json"], env
    )
    result = orjson.loads(as_json.stdout)
    assert [m["role"] for m in result["messages"]] == [m["role"] for m in transcript.messages]
    assert result["events"] == []  # a replay of the same transcript decides nothing new

    status = run_cwa(["session", "status", "--session", "pi-1", "--project", "/work/p", "--json"], env)
    assert status.returncode == 0 and orjson.loads(status.stdout)["epoch"] == 1
    # with the transcript: its turns and tokens as the engine counted them, and nothing written
    archive_bytes = _file_bytes(env["CWA_DB"])
    counted = run_cwa(
        ["session", "status", "--session", "pi-1", "--project", "/work/p", "--file", str(session_file), "--json"], env
    )
    found = orjson.loads(counted.stdout)
    assert counted.returncode == 0 and found["inMemory"] is False
    assert (found["turns"], found["tokens"]) == (result["status"]["turns"], result["status"]["tokens"])
    assert _file_bytes(env["CWA_DB"]) == archive_bytes
    missing = run_cwa(["session", "status", "--session", "nope", "--project", "/work/p"], env)
    assert missing.returncode == 3 and b"Traceback" not in missing.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    broken = run_cwa(["session", "replay", "--session", "x", "--file", str(bad)], env)
    assert broken.returncode == 2 and b"Traceback" not in broken.stderr


def _file_bytes(db: str) -> bytes:
    """The archive file and its WAL, as they are on disk."""
    wal = Path(db + "-wal")
    return Path(db).read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def test_a_pi_session_file_is_read_as_pi_builds_its_context(tmp_path):
    from cwa.session.transcript_file import parent_session_id, read_transcript

    parent_file = tmp_path / "parent.jsonl"
    parent_file.write_bytes(orjson.dumps({"type": "session", "version": 3, "id": "parent-uuid", "cwd": "/w"}) + b"\n")
    entries = [
        {"type": "session", "version": 3, "id": "child", "cwd": "/w", "parentSession": str(parent_file)},
        {"type": "message", "id": "a", "parentId": None, "message": {"role": "user", "content": "one"}},
        {"type": "message", "id": "b", "parentId": "a", "message": {"role": "assistant", "content": []}},
        {"type": "message", "id": "x", "parentId": "b", "message": {"role": "user", "content": "abandoned branch"}},
        {"type": "message", "id": "c", "parentId": "b", "message": {"role": "user", "content": "two"}},
        {"type": "model_change", "id": "m", "parentId": "c", "provider": "faux", "modelId": "faux-1"},
        {
            "type": "compaction",
            "id": "k",
            "parentId": "m",
            "summary": "earlier work",
            "firstKeptEntryId": "c",
            "tokensBefore": 900,
            "timestamp": "2026-11-19T10:00:00Z",
        },
        {
            "type": "custom_message",
            "id": "d",
            "parentId": "k",
            "customType": "note",
            "content": "hello",
            "display": True,
        },
        {"type": "message", "id": "e", "parentId": "d", "message": {"role": "user", "content": "three"}},
    ]
    path = tmp_path / "child.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(e) for e in entries) + b"\n")
    messages, header = read_transcript(path)
    assert [(m["role"], m.get("content") or m.get("summary")) for m in messages] == [
        ("compactionSummary", "earlier work"),
        ("user", "two"),
        ("custom", "hello"),
        ("user", "three"),
    ]
    assert parent_session_id(header) == "parent-uuid"
    bare = tmp_path / "bare.jsonl"
    bare.write_bytes(b'{"role": "user", "content": "hi"}\n')
    assert read_transcript(bare) == ([{"role": "user", "content": "hi"}], None)
