"""A process whose stdout carries a protocol (serve's JSON lines, `cwa mcp`, a bulk index's helper)
keeps it: what else writes to stdout while it serves goes to stderr (cwa/protocol_output.py).

Each process runs with a `sitecustomize` that makes cwa's own work print to stdout, both through
Python's `sys.stdout` and to descriptor 1 directly, as a chatty library or a tool attached to the
process might."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from conftest import hermetic_env

from cwa.child_process import CWA_FOLDER

NOISE = textwrap.dedent(
    """
    import os
    import sys


    def _noisy(function):
        def noisy(*args, **kwargs):
            print("stray print", flush=True)
            os.write(1, b"stray write\\n")
            return function(*args, **kwargs)

        return noisy


    import cwa.api
    import cwa.store.index_queue

    if os.environ["NOISY"] == "requests":  # every serve and MCP request
        cwa.api.Archive.call = _noisy(cwa.api.Archive.call)
    else:  # a document's pure work, the helper's
        cwa.store.index_queue.prepare_queued = _noisy(cwa.store.index_queue.prepare_queued)
    """
)


def noisy_env(tmp_path, noisy: str):
    folder = tmp_path / "noise"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(NOISE)
    env = hermetic_env(tmp_path, tmp_path / "archive.db")
    env["PYTHONPATH"] = os.pathsep.join([str(folder), CWA_FOLDER])
    env["CWA_SEMANTIC_RETRIEVAL"] = "false"
    env["NOISY"] = noisy
    return env


def test_serve_answers_only_json_lines_while_something_else_prints(tmp_path):
    requests = [
        {"id": 1, "method": "status"},
        {"id": 2, "method": "admit", "params": {"project": "/p", "sessionId": "s", "kind": "turn",
                                                "messages": [{"role": "user", "text": "retry budget"}]}},
        {"id": 3, "method": "search", "params": {"project": "/p", "query": "retry budget", "leaseSeconds": 0}},
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "cwa", "serve"],
        input=b"".join(json.dumps(r).encode() + b"\n" for r in requests),
        capture_output=True,
        env=noisy_env(tmp_path, "requests"),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    replies = [json.loads(line) for line in done.stdout.splitlines()]  # every line of stdout is a reply
    assert [r["id"] for r in replies] == [1, 2, 3] and all("result" in r for r in replies)
    assert replies[2]["result"]["results"]
    assert done.stderr.decode().count("stray write") >= 3  # the requests' noise went to stderr


def test_mcp_answers_only_json_rpc_while_something_else_prints(tmp_path):
    frames = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "context_window_status", "arguments": {}}},
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "cwa", "mcp"],
        input=b"".join(json.dumps(f).encode() + b"\n" for f in frames),
        capture_output=True,
        env=noisy_env(tmp_path, "requests") | {"CWA_PROJECT": "/p", "CWA_SESSION": "s"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in replies] == [0, 1] and not replies[1]["result"].get("isError")
    assert "stray write" in done.stderr.decode()


def test_a_rebuilds_helper_answers_its_parent_while_something_else_prints(tmp_path):
    env = noisy_env(tmp_path, "prepare")
    admits = "\n".join(
        json.dumps({"project": "/p", "sessionId": "s", "kind": "turn",
                    "messages": [{"role": "user", "text": f"note {n} about src/module_{n}.py"}]})
        for n in range(100)
    )  # fmt: skip
    (tmp_path / "turns.jsonl").write_text(admits)
    admitted = subprocess.run(
        [sys.executable, "-m", "cwa", "admit", "--file", str(tmp_path / "turns.jsonl"), "--json"],
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert admitted.returncode == 0, admitted.stderr.decode()
    done = subprocess.run(
        [sys.executable, "-m", "cwa", "index", "rebuild", "--json"], capture_output=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()
    # The helper prepared all 100 (more than HELPER_MIN_DOCUMENTS): had its noise reached its
    # answers, the parent would have prepared them itself, printing to its own stdout here.
    assert b"stray" not in done.stdout
    assert json.loads(done.stdout)["documents"] == 100


def test_serve_started_with_stdout_closed_says_so_without_a_traceback(tmp_path):
    done = subprocess.run(
        ["sh", "-c", 'exec "$0" -m cwa serve >&-', sys.executable],
        input=b'{"id": 1, "method": "status"}\n',
        capture_output=True,
        env=hermetic_env(tmp_path, tmp_path / "archive.db"),
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.decode().strip() == "cwa: invalid-request: stdout is closed: there is nowhere to answer"


def test_call_prints_only_its_answer_or_its_error_while_something_else_prints(tmp_path):
    env = noisy_env(tmp_path, "requests")
    done = subprocess.run(
        [sys.executable, "-m", "cwa", "call", "status"], input=b"{}", capture_output=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    assert "schemaVersion" in json.loads(done.stdout)  # stdout is the answer alone
    assert "stray write" in done.stderr.decode()
    failed = subprocess.run(
        [sys.executable, "-m", "cwa", "call", "get"],
        input=b'{"documentId": "doc-0000"}',
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert failed.returncode != 0
    assert json.loads(failed.stdout)["error"]["code"] == "not-found"  # the failure's JSON still on stdout


def test_serve_started_with_stderr_or_stdin_closed_answers_or_ends_cleanly(tmp_path):
    env = hermetic_env(tmp_path, tmp_path / "archive.db")
    request = b'{"id": 1, "method": "status"}\n'
    no_stderr = subprocess.run(
        ["sh", "-c", 'exec "$0" -m cwa serve 2>&-', sys.executable],
        input=request,
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert no_stderr.returncode == 0
    assert json.loads(no_stderr.stdout)["id"] == 1  # its messages went to the null device, not stdout
    no_stdin = subprocess.run(
        ["sh", "-c", 'exec "$0" -m cwa serve <&-', sys.executable], capture_output=True, env=env, timeout=60
    )
    assert (no_stdin.returncode, no_stdin.stdout, no_stdin.stderr) == (0, b"", b"")  # end of input at once
