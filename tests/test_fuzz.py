"""Fuzzing the contract: every method's params (guided by its schema, then mutated), serve lines
and the CLI's file inputs give answers or typed errors — never a traceback — and a rejected
request writes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import apsw
import pytest
from conftest import hermetic_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cwa import contract
from cwa.api import METHODS
from cwa.errors import CwaError

# Methods that load a model or run long on purpose; their params are still fuzzed through serve's
# validation (an invalid request is refused before any work).
HEAVY = {"models-optimize", "index-embed"}
PROJECT = "/work/fuzz"
JSON_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63), st.floats(allow_nan=False), st.text(max_size=40)
)
ANY_JSON = st.recursive(
    JSON_LEAF,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
PI_MESSAGES = st.sampled_from(
    [
        {"role": "user", "content": "where is the retry loop?", "timestamp": 1_795_000_000_000},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "in src/retry.py"}],
            "stopReason": "stop",
            "timestamp": 1_795_000_001_000,
        },
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "bash",
            "content": [{"type": "text", "text": "ok"}],
            "isError": False,
            "timestamp": 1_795_000_002_000,
        },
        {"role": "user", "content": [{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}]},
        {"role": "custom", "customType": "x", "content": 5},
        {"role": "user"},
    ]
)


def spec_values(spec) -> st.SearchStrategy:
    """Values of `spec`: mostly valid ones, at and around its bounds."""
    if isinstance(spec, contract.Str):
        top = min(spec.max_len, 64)
        return st.one_of(
            st.text(min_size=spec.min_len, max_size=max(spec.min_len, top)),
            st.sampled_from([PROJECT, "s1", "doc-0123456789abcdef0123", "k-" + "0" * 32, "cwa1AAAA"]),
        )
    if isinstance(spec, contract.Int):
        low = spec.minimum if spec.minimum is not None else -10
        high = spec.maximum if spec.maximum is not None else 10**6
        return st.one_of(st.integers(low, min(high, low + 50)), st.sampled_from([low, high, low - 1, high + 1]))
    if isinstance(spec, contract.Bool):
        return st.booleans()
    if isinstance(spec, contract.Enum):
        return st.sampled_from(list(spec.values) + ["nope"])
    if isinstance(spec, contract.Timestamp):
        return st.sampled_from(
            ["2026-11-30T10:00:00Z", "0050-01-01T00:00:00Z", "9999-12-31T00:00:00Z", 1_795_000_000_000, "yesterday", -1]
        )
    if isinstance(spec, contract.JsonObject):
        return st.dictionaries(st.text(max_size=8), JSON_LEAF, max_size=4)
    if isinstance(spec, contract.PiMessage):
        return PI_MESSAGES
    if isinstance(spec, contract.List):
        return st.lists(spec_values(spec.item), max_size=min(spec.max_items, 4))
    if isinstance(spec, contract.Obj):
        return st.fixed_dictionaries(
            {name: spec_values(f.spec) for name, f in spec.fields.items() if f.required},
            optional={name: spec_values(f.spec) for name, f in spec.fields.items() if not f.required},
        )
    return ANY_JSON


def mutated(schema) -> st.SearchStrategy:
    """Schema-guided params, sometimes with a field replaced by any JSON or an unknown field."""
    base = spec_values(schema)

    def mutate(params, data):
        if not isinstance(params, dict) or not data.draw(st.booleans()):
            return params
        params = dict(params)
        if params and data.draw(st.booleans()):
            params[data.draw(st.sampled_from(sorted(params)))] = data.draw(ANY_JSON)
        else:
            params[data.draw(st.text(min_size=1, max_size=8))] = data.draw(ANY_JSON)
        return params

    return st.tuples(base, st.data()).map(lambda pair: mutate(pair[0], pair[1]))


def _counts(conn: apsw.Connection) -> tuple[int, ...]:
    return tuple(
        conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in ("documents", "chunks", "sessions", "projects", "leases", "hint_records")
    )


@pytest.mark.parametrize("method", sorted(set(METHODS) - HEAVY))
def test_every_method_answers_or_raises_a_typed_error(archive, method):
    schema = METHODS[method].schema

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(params=st.one_of(mutated(schema), ANY_JSON))
    def check(params):
        before = _counts(archive.conn)
        try:
            answer = archive.call(method, params)
        except CwaError as error:
            assert error.code in {
                "invalid-request",
                "not-found",
                "conflict",
                "limit-exceeded",
                "disk-low",
                "storage-busy",
                "model-unavailable",
            }, (method, params, error.to_json())
            if error.code in ("invalid-request", "limit-exceeded"):
                assert _counts(archive.conn) == before, (method, params)  # a rejection writes nothing
            json.dumps(error.to_json())
            return
        assert isinstance(answer, dict)
        json.dumps(answer)

    check()
    # whatever was accepted, rejected or half-done, the file the method worked on is whole
    assert archive.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_serve_answers_every_line_and_stays_bounded(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "cwa", "serve", "--no-background"],
        env=hermetic_env(tmp_path, tmp_path / "a.db"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    names = sorted(set(METHODS) - HEAVY)
    lines: list[bytes] = []

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(
        method=st.sampled_from(names + ["bogus", "x" * 300]),
        data=st.data(),
        junk=st.one_of(st.none(), st.binary(max_size=64)),
    )
    def collect(method, data, junk):
        if junk is not None:
            lines.append(junk.replace(b"\n", b" "))
            return
        params = data.draw(mutated(METHODS[method].schema) if method in METHODS else ANY_JSON)
        ident = data.draw(st.one_of(st.integers(), st.text(max_size=300), st.none(), st.floats(allow_nan=False)))
        lines.append(json.dumps({"id": ident, "method": method, "params": params}).encode())

    collect()
    lines.insert(len(lines) // 2, b"x" * (70 << 20))  # a line over the 64 MiB limit, read in bounded pieces
    lines.append(b'{"id": "last", "method": "status", "params": {}}')
    feeder = threading.Thread(target=lambda: (process.stdin.write(b"\n".join(lines) + b"\n"), process.stdin.close()))
    feeder.start()
    out = process.stdout.read()
    err = process.stderr.read()
    feeder.join()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    replies = [json.loads(line) for line in out.splitlines()]
    expected = [line for line in lines if line.strip()]
    assert len(replies) == len(expected)  # one answer per line, in order, serve still serving at the end
    assert replies[-1]["id"] == "last" and "result" in replies[-1]
    assert all(("result" in r) != ("error" in r) for r in replies)
    assert all(r["error"]["code"] != "internal" for r in replies if "error" in r)
    assert any(r["error"]["code"] == "limit-exceeded" for r in replies if "error" in r)
    assert b"Traceback" not in err and process.returncode == 0
    assert usage.ru_maxrss < 512 * 1024, f"serve peaked at {usage.ru_maxrss // 1024} MiB"  # kilobytes on Linux


@pytest.mark.parametrize(
    "command",
    [
        ["admit", "--file"],
        ["checkpoint", "--file"],
        ["session", "replay", "--session", "s", "--file"],
        ["evidence", "verify"],
        ["call", "admit"],
    ],
)
def test_cli_file_inputs_give_typed_errors(tmp_path, command):
    env = hermetic_env(tmp_path, tmp_path / "a.db")
    source = tmp_path / "input"

    @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(
        body=st.one_of(
            st.binary(max_size=200),
            ANY_JSON.map(lambda v: json.dumps(v).encode()),
            st.just(
                b'{"project": "/p", "sessionId": "s", "kind": "turn", "messages": [{"role": "user", "text": "hi"}]}'[
                    :-7
                ]
            ),
        )
    )
    def check(body):
        source.write_bytes(body)
        if command[0] == "call":
            done = subprocess.run(
                [sys.executable, "-m", "cwa", *command], input=body, env=env, capture_output=True, timeout=120
            )
        else:
            done = subprocess.run(
                [sys.executable, "-m", "cwa", *command, str(source)], env=env, capture_output=True, timeout=120
            )
        assert done.returncode in {0, 1, 2, 3, 4, 5, 11}, (command, body, done.returncode, done.stderr[-500:])
        assert b"Traceback" not in done.stderr

    check()
