"""`cwa serve`: JSON lines in, one reply per line out, malformed lines answered, EOF ends it."""

from __future__ import annotations

import io
import subprocess
import sys

import orjson
from conftest import hermetic_env, turn

from cwa.api import Archive
from cwa.serve import handle_line, serve


def _serve(archive: Archive, payload: bytes) -> list[dict]:
    out = io.BytesIO()
    assert serve(archive.call, io.BytesIO(payload), out) == 0
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


def test_requests_are_answered_in_order_with_their_ids(archive):
    admit = orjson.dumps({"id": "a", "method": "admit", "params": turn("serve me")})
    replies = _serve(archive, admit + b"\n" + b'{"id": 7, "method": "status"}\n')
    assert replies[0]["id"] == "a" and replies[0]["result"]["created"] is True
    assert replies[1] == {"id": 7, "result": replies[1]["result"]}
    assert replies[1]["result"]["documents"]["total"] == 1
    doc_id = replies[0]["result"]["documentId"]
    got = _serve(
        archive, orjson.dumps({"id": 3, "method": "get", "params": {"project": "/work/p", "documentId": doc_id}})
    )
    assert got[0]["result"]["text"].startswith("[user]\nserve me")


def test_malformed_envelopes_get_errors_and_serving_continues(archive):
    lines = [
        b"[1, 2]",
        b'{"id": 1, "method": "nope", "params": {}}',
        b'{"id": 2, "method": "status", "params": {}, "extra": true}',
        b'{"id": {"x": 1}, "method": "status"}',
        b'{"id": 4, "method": 5}',
        b'{"id": 5, "method": "status", "params": [1]}',
        b"",  # blank lines are skipped
        b'{"id": 6, "method": "status"}',
    ]
    replies = _serve(archive, b"\n".join(lines) + b"\n")
    assert [r.get("id") for r in replies] == [None, 1, 2, None, 4, 5, 6]
    assert [r["error"]["code"] for r in replies[:-1]] == ["invalid-request"] * 6
    assert replies[1]["error"]["details"]["reason"] == "unknown-method"
    assert "result" in replies[-1]


def test_oversized_line_is_rejected_without_reading_it_whole(archive, monkeypatch):
    import cwa.serve as serve_module

    monkeypatch.setattr(serve_module.limits, "MAX_REQUEST_BYTES", 1024)
    reply = handle_line(archive.call, None)
    assert reply["error"]["code"] == "limit-exceeded"
    out = io.BytesIO()
    payload = (
        b'{"id": 1, "method": "status", "params": {"pad": "' + b"x" * 5000 + b'"}}\n{"id": 2, "method": "status"}\n'
    )
    serve_module.serve(archive.call, io.BytesIO(payload), out)
    replies = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert replies[0]["error"]["code"] == "limit-exceeded"
    assert replies[1]["id"] == 2 and "result" in replies[1]


def test_serve_process_ends_cleanly_at_eof(tmp_path):
    db = tmp_path / "a.db"
    process = subprocess.Popen(
        [sys.executable, "-m", "cwa", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=hermetic_env(tmp_path, db),
    )
    process.stdin.write(orjson.dumps({"id": 1, "method": "admit", "params": turn("over a pipe")}) + b"\n")
    process.stdin.flush()
    first = orjson.loads(process.stdout.readline())  # answered before stdin closes
    assert first["id"] == 1 and first["result"]["created"] is True
    process.stdin.write(b"garbage\n")
    process.stdin.flush()
    assert orjson.loads(process.stdout.readline())["error"]["code"] == "invalid-request"
    process.stdin.close()
    assert process.wait(timeout=60) == 0
    assert process.stdout.read() == b""
    assert process.stderr.read() == b""


def test_serve_reports_an_unopenable_archive_per_request(tmp_path):
    db = tmp_path / "not-an-archive.db"
    db.write_bytes(b"plain text, not SQLite" * 50)
    completed = subprocess.run(
        [sys.executable, "-m", "cwa", "serve"],
        input=b'{"id": 1, "method": "status"}\n',
        capture_output=True,
        env=hermetic_env(tmp_path, db),
        timeout=60,
    )
    assert completed.returncode == 0
    assert orjson.loads(completed.stdout)["error"]["code"] == "archive-incompatible"
