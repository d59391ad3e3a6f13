"""Malformed requests get their typed error through Python, `cwa call` and `cwa serve`, and the
archive file is byte-for-byte unchanged afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import blake3
import orjson
import pytest
from conftest import hermetic_env, run_cwa, turn

from cwa.api import Archive
from cwa.errors import EXIT_CODES, CwaError
from cwa.limits import MAX_DOCUMENT_BYTES, MAX_METADATA_BYTES, MAX_SOURCE_MESSAGES

WIRE_ONLY = object()  # a case that only exists as bytes (not JSON, invalid UTF-8, ...)


@dataclass
class Case:
    name: str
    method: str
    params: Any
    code: str
    wire: bytes | None = None  # defaults to the JSON of params

    def wire_bytes(self) -> bytes:
        return self.wire if self.wire is not None else json.dumps(self.params).encode("utf-8")

    def wire_is_json(self) -> bool:
        try:
            orjson.loads(self.wire_bytes())
        except orjson.JSONDecodeError:
            return False
        return True


def _admit(**changes: Any) -> dict:
    request = turn("bad input probe")
    for key, value in changes.items():
        if value is None:
            request.pop(key, None)
        else:
            request[key] = value
    return request


def _message(**changes: Any) -> dict:
    message = {"role": "user", "text": "hi"}
    message.update(changes)
    return _admit(messages=[message])


def _deep(depth: int) -> dict:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"d": value}
    return value


CASES = [
    Case("unknown field", "admit", _admit(colour="red"), "invalid-request"),
    Case("unknown message field", "admit", _message(mood="happy"), "invalid-request"),
    Case("project wrong type", "admit", _admit(project=42), "invalid-request"),
    Case("project missing", "admit", _admit(project=None), "invalid-request"),
    Case("project empty", "admit", _admit(project=""), "invalid-request"),
    Case("sessionId missing", "admit", _admit(sessionId=None), "invalid-request"),
    Case("sessionId too long", "admit", _admit(sessionId="s" * 257), "invalid-request"),
    Case("bad kind", "admit", _admit(kind="chat"), "invalid-request"),
    Case("bad retention class", "admit", _admit(retentionClass="forever"), "invalid-request"),
    Case("bad role", "admit", _message(role="system"), "invalid-request"),
    Case("empty messages", "admit", _admit(messages=[]), "invalid-request"),
    Case("messages not a list", "admit", _admit(messages={"role": "user"}), "invalid-request"),
    Case("message text missing", "admit", _admit(messages=[{"role": "user"}]), "invalid-request"),
    Case("message text a number", "admit", _message(text=12), "invalid-request"),
    Case("message key empty", "admit", _message(key=""), "invalid-request"),
    Case("text over 8 MiB", "admit", _message(text="x" * (MAX_DOCUMENT_BYTES + 1)), "limit-exceeded"),
    Case(
        "document over 8 MiB in total",
        "admit",
        _admit(messages=[{"role": "user", "text": "é" * (MAX_DOCUMENT_BYTES // 4)}] * 3),
        "limit-exceeded",
    ),
    Case(
        "too many messages",
        "admit",
        _admit(messages=[{"role": "user", "text": str(n)} for n in range(MAX_SOURCE_MESSAGES + 1)]),
        "limit-exceeded",
    ),
    Case(
        "many messages of 1 MiB each",
        "admit",
        _admit(messages=[{"role": "user", "text": "m" * (1 << 20)}] * 9),
        "limit-exceeded",
    ),
    Case("metadata over 1 MiB", "admit", _admit(metadata={"blob": "m" * MAX_METADATA_BYTES}), "limit-exceeded"),
    Case("metadata not an object", "admit", _admit(metadata=[1, 2]), "invalid-request"),
    Case("metadata too deep", "admit", _admit(metadata=_deep(40)), "invalid-request"),
    Case("createdAt words", "admit", _admit(createdAt="yesterday"), "invalid-request"),
    Case("createdAt month 13", "admit", _admit(createdAt="2026-13-01T00:00:00Z"), "invalid-request"),
    Case("createdAt boolean", "admit", _admit(createdAt=True), "invalid-request"),
    Case("timestamp negative millis", "admit", _message(timestamp=-5), "invalid-request"),
    Case(
        "duplicate message keys",
        "admit",
        _admit(messages=[{"key": "k", "role": "user", "text": "a"}] * 2),
        "invalid-request",
    ),
    Case("supersedes without version", "admit", _admit(supersedes={"documentId": "doc-x"}), "invalid-request"),
    Case(
        "supersedes version zero", "admit", _admit(supersedes={"documentId": "doc-x", "version": 0}), "invalid-request"
    ),
    Case(
        "supersedes unknown document", "admit", _admit(supersedes={"documentId": "doc-none", "version": 1}), "not-found"
    ),
    Case("subject key held by another document", "admit", _admit(subjectKey="plan"), "conflict"),
    Case("session is its own parent", "admit", _admit(parentSessionId="s1"), "invalid-request"),
    Case("lone surrogate in text", "admit", _message(text="bad \ud800 text"), "invalid-request"),
    Case("params is an array", "admit", [1, 2, 3], "invalid-request"),
    Case("params is a string", "admit", "hello", "invalid-request"),
    Case("params is null", "admit", None, "invalid-request"),
    Case("not JSON", "admit", WIRE_ONLY, "invalid-request", wire=b'{"project": '),
    Case("NaN literal", "admit", WIRE_ONLY, "invalid-request", wire=b'{"project": NaN}'),
    Case(
        "invalid UTF-8",
        "admit",
        WIRE_ONLY,
        "invalid-request",
        wire=b'{"project": "/p", "sessionId": "\xff\xfe", "kind": "turn", "messages": []}',
    ),
    Case("get without id", "get", {"project": "/work/p"}, "invalid-request"),
    Case("get unknown id", "get", {"project": "/work/p", "documentId": "doc-missing"}, "not-found"),
    Case(
        "get version as text", "get", {"project": "/work/p", "documentId": "doc-x", "version": "1"}, "invalid-request"
    ),
    Case(
        "get version boolean", "get", {"project": "/work/p", "documentId": "doc-x", "version": True}, "invalid-request"
    ),
    Case(
        "get negative range",
        "get",
        {"project": "/work/p", "documentId": "doc-x", "range": {"start": -1, "end": 4}},
        "invalid-request",
    ),
    Case("status unknown field", "status", {"verbose": True}, "invalid-request"),
    Case("search without query or relation", "search", {"project": "/work/p"}, "invalid-request"),
    Case("search bad relation", "search", {"project": "/work/p", "relation": "latest-mood"}, "invalid-request"),
    Case("search limit zero", "search", {"project": "/work/p", "query": "x", "limit": 0}, "invalid-request"),
    Case(
        "search session scope without session",
        "search",
        {"project": "/work/p", "query": "x", "scope": "session"},
        "invalid-request",
    ),
    Case("search query too long", "search", {"project": "/work/p", "query": "q" * 65_537}, "limit-exceeded"),
    Case(
        "search too many visible keys",
        "search",
        {"project": "/work/p", "query": "plan", "excludeVisibleSourceKeys": [f"k{n}" for n in range(1001)]},
        "limit-exceeded",
    ),
    # preflight once skipped search's own check and took 1.5 MiB of keys: the limit is the contract's
    Case(
        "preflight visible keys over 1 MiB",
        "preflight",
        {
            "project": "/work/p",
            "sessionId": "s",
            "messageKey": "m1",
            "text": "what was the plan?",
            "excludeVisibleSourceKeys": ["漢" * 500 + str(n) for n in range(1000)],
        },
        "limit-exceeded",
    ),
    Case(
        "gather visible keys over 1 MiB",
        "gather",
        {"project": "/work/p", "query": "plan", "excludeVisibleSourceKeys": ["漢" * 500 + str(n) for n in range(1000)]},
        "limit-exceeded",
    ),
    Case("tool without host", "tool", {"project": "/work/p", "sessionId": "s", "name": "x"}, "invalid-request"),
    Case(
        "tool arguments not an object",
        "tool",
        {"project": "/work/p", "sessionId": "s", "host": "pi", "name": "context_recall", "arguments": [1]},
        "invalid-request",
    ),
    Case(
        "supersede by a note without session",
        "supersede",
        {"project": "/work/p", "documentId": "doc-a", "note": "now it is 3"},
        "invalid-request",
    ),
    Case(
        "recall with locator and id",
        "recall",
        {"project": "/work/p", "locator": "cwa1.a.b", "documentId": "doc-x"},
        "invalid-request",
    ),
    Case("recall with neither", "recall", {"project": "/work/p"}, "invalid-request"),
    Case(
        "recall maxTokens too small",
        "recall",
        {"project": "/work/p", "documentId": "doc-x", "maxTokens": 10},
        "invalid-request",
    ),
    Case(
        "supersede unknown document",
        "supersede",
        {"project": "/work/p", "documentId": "doc-a", "by": {"documentId": "doc-b"}},
        "not-found",
    ),
    Case("supersede without by", "supersede", {"project": "/work/p", "documentId": "doc-a"}, "invalid-request"),
    # nested deeper than MAX_JSON_DEPTH: once, this killed `cwa serve` while it wrote the reply
    Case(
        "message field nested 300 deep",
        "session-context",
        {"project": "/work/p", "sessionId": "deep", "messages": [{"role": "user", "content": "hi", "x": _deep(300)}]},
        "invalid-request",
    ),
    Case(
        "toolCall arguments nested 300 deep",
        "session-context",
        {
            "project": "/work/p",
            "sessionId": "deep",
            "messages": [
                {
                    "role": "assistant",
                    "content": [{"type": "toolCall", "id": "c1", "name": "bash", "arguments": _deep(300)}],
                }
            ],
        },
        "invalid-request",
    ),
]


@pytest.fixture
def prepared_db(tmp_path):
    """An archive holding one document (subject key "plan"), closed and fully checkpointed."""
    db = tmp_path / "a" / "archive.db"
    with Archive.open(db) as archive:
        archive.admit(turn("the plan", subjectKey="plan", createdAt="2026-01-01T00:00:00Z"))
    return db


def _fingerprint(db) -> str:
    assert not db.with_name(db.name + "-wal").exists()  # every connection closed and checkpointed
    return blake3.blake3(db.read_bytes()).hexdigest()


def test_table_has_at_least_25_distinct_cases():
    assert len(CASES) >= 25
    assert len({c.name for c in CASES}) == len(CASES)


def test_python_callers_get_typed_errors_and_nothing_changes(prepared_db):
    before = _fingerprint(prepared_db)
    with Archive.open(prepared_db) as archive:
        for case in CASES:
            if case.params is WIRE_ONLY:
                continue
            with pytest.raises(CwaError) as caught:
                archive.call(case.method, case.params)
            assert caught.value.code == case.code, case.name
            assert set(caught.value.to_json()) == {"code", "message", "details"}
            if case.code == "limit-exceeded":  # how far over: the size beside the limit
                details = caught.value.details
                assert isinstance(details["size"], int) and details["size"] > details["limit"], case.name
    assert _fingerprint(prepared_db) == before


def test_cwa_call_prints_typed_errors_with_distinct_exit_codes(prepared_db, tmp_path):
    before = _fingerprint(prepared_db)
    env = hermetic_env(tmp_path, prepared_db)
    for case in CASES:
        completed = run_cwa(["call", case.method], env, stdin=case.wire_bytes())
        assert completed.returncode == EXIT_CODES[case.code], (case.name, completed.stderr)
        error = orjson.loads(completed.stdout)["error"]
        assert error["code"] == case.code, case.name
        assert b"Traceback" not in completed.stderr, case.name
    assert _fingerprint(prepared_db) == before


def test_cwa_serve_answers_each_bad_line_and_keeps_serving(prepared_db, tmp_path):
    before = _fingerprint(prepared_db)
    lines = []
    for number, case in enumerate(CASES):
        if case.params is WIRE_ONLY:
            lines.append(case.wire_bytes())  # the whole line is unreadable
        else:
            lines.append(
                b'{"id": %d, "method": "%s", "params": ' % (number, case.method.encode()) + case.wire_bytes() + b"}"
            )
    lines.append(b'{"id": "last", "method": "status", "params": {}}')
    completed = subprocess.run(
        [sys.executable, "-m", "cwa", "serve", "--no-background"],  # only the requests may write
        input=b"\n".join(lines) + b"\n",
        capture_output=True,
        env=hermetic_env(tmp_path, prepared_db),
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    replies = [orjson.loads(line) for line in completed.stdout.splitlines()]
    assert len(replies) == len(CASES) + 1
    for number, (case, reply) in enumerate(zip(CASES, replies)):
        assert reply["error"]["code"] == case.code, case.name
        # A line that is not JSON has no readable id: its reply carries "id": null.
        expected_id = number if case.params is not WIRE_ONLY and case.wire_is_json() else None
        assert reply["id"] == expected_id, case.name
    assert replies[-1]["id"] == "last" and replies[-1]["result"]["documents"]["total"] == 1
    assert _fingerprint(prepared_db) == before


def test_the_error_table_holds_every_error_type_once_and_docs_list_each():
    from conftest import REPO

    from cwa import errors

    declared = {
        t for t in vars(errors).values() if isinstance(t, type) and issubclass(t, CwaError) and t is not CwaError
    }
    assert declared == set(errors.ERROR_TYPES)
    assert len(EXIT_CODES) == len(errors.ERROR_TYPES) and len(set(EXIT_CODES.values())) == len(EXIT_CODES)
    documented = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")
    for code, status in EXIT_CODES.items():
        assert f"| `{code}` | {status} |" in documented, code


def test_nesting_is_bounded_exactly_where_the_contract_says():
    from cwa import limits
    from cwa.json_input import ORJSON_MAX_DEPTH, within_depth

    def lists(depth: int) -> Any:
        value: Any = 0
        for _ in range(depth):
            value = [value]
        return value

    assert within_depth(lists(limits.MAX_JSON_DEPTH)) and not within_depth(lists(limits.MAX_JSON_DEPTH + 1))
    orjson.dumps(lists(ORJSON_MAX_DEPTH))  # the bound the check relies on is orjson's own
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(lists(ORJSON_MAX_DEPTH + 1))


def test_a_reply_that_cannot_be_written_is_an_internal_error_and_serving_goes_on():
    import io

    from cwa.serve import serve

    def call(method: str, params: Any) -> dict:
        return {"unwritable": {1, 2}} if method == "bad" else {"ok": True}

    out = io.BytesIO()
    assert serve(call, io.BytesIO(b'{"id": 1, "method": "bad"}\n{"id": 2, "method": "good"}\n'), out) == 0
    first, second = (orjson.loads(line) for line in out.getvalue().splitlines())
    assert first["id"] == 1 and first["error"]["code"] == "internal"
    assert second == {"id": 2, "result": {"ok": True}}
