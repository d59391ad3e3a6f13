"""The agent tools run once, in cwa: the `tool` method answers what the model reads, the same for
every host; a host only names itself (which tools it offers) and forwards."""

from __future__ import annotations

import orjson
from conftest import hermetic_env, run_cwa, turn

from cwa import agent_tools, routing

P = "/work/p"


def tool(archive, name: str, host: str = "pi", **arguments) -> dict:
    return archive.call("tool", {"project": P, "sessionId": "s1", "host": host, "name": name, "arguments": arguments})


def test_every_tool_answers_text_and_details_through_one_method(archive):
    archive.admit(turn("the flaky test lives in tests/test_retry.py and fails with ETIMEDOUT"))
    kept = tool(archive, "context_window_archive", text="Convention: retries stop after 5 attempts.", subjectKey="r")
    assert kept["text"].startswith("archived as doc-") and kept["text"].endswith("(subject r)")
    again = tool(archive, "context_window_archive", text="Convention: retries stop after 3 attempts.", subjectKey="r")
    assert again["details"]["documentId"] == kept["details"]["documentId"] and again["details"]["version"] == 2

    found = tool(archive, "context_window_search", query="tests/test_retry.py")
    assert not found["isError"] and found["text"] == found["details"]["rendered"]
    locator = found["details"]["results"][0]["locator"]
    recalled = tool(archive, "context_recall", locator=locator)
    assert recalled["details"]["status"] == "resolved" and "ETIMEDOUT" in recalled["text"]
    gathered = tool(archive, "context_window_gather", query="flaky ETIMEDOUT")
    assert "ETIMEDOUT" in gathered["text"]
    page = tool(archive, "context_window_traverse", locator=locator)
    assert page["details"]["status"] == "ok"

    first = found["details"]["results"][0]["documentId"]
    retired = tool(archive, "context_window_supersede", documentId=first, note="the test is fixed now")
    replacement = retired["details"]["replacement"]
    assert retired["text"] == f"{first} is superseded by {replacement['documentId']} v1"
    note = archive.get({"documentId": replacement["documentId"]})
    assert note["kind"] == "decision" and note["text"].endswith("the test is fixed now")
    assert archive.get({"documentId": first})["state"] == "superseded"

    status = tool(archive, "context_window_status", host="mcp")
    assert "this project holds 4 document(s) (2 live, 2 superseded)" in status["text"]


def test_a_mistake_is_a_typed_refusal_the_model_reads(archive):
    cases = [
        ("context_window_search", {}, "missing", "give query or relation, or both"),
        ("context_recall", {"locator": "x", "documentId": "doc-1"}, "missing", "give exactly one of locator or"),
        ("context_window_traverse", {}, "missing", "give exactly one of locator, documentId or cursor"),
        ("context_window_archive", {"text": "a", "messages": []}, "too-few", "messages needs at least 1"),
        ("context_window_archive", {}, "missing", "give exactly one of text or messages"),
        ("context_window_supersede", {"documentId": "doc-a"}, "missing", "give exactly one of replacement or note"),
        ("context_window_search", {"query": "x", "limit": None}, "wrong-type", "limit must be an integer, not null"),
        ("context_window_gather", {"query": "x", "maxTokens": 10}, "out-of-range", "maxTokens must be between"),
        ("context_window_search", {"bogus": 1}, "unknown-field", "unknown field bogus"),
        ("no_such_tool", {}, "unknown-tool", "unknown tool no_such_tool"),
    ]
    for name, arguments, reason, words in cases:
        answer = tool(archive, name, **arguments)
        assert answer["isError"] and answer["text"].startswith("cwa invalid-request: "), (name, answer)
        assert answer["details"]["error"]["details"]["reason"] == reason, (name, answer)
        assert words in answer["text"], (name, answer["text"])
    # offered by MCP only: Pi's model never sees it, so a call of it is unknown there
    assert tool(archive, "context_window_status")["details"]["error"]["details"]["reason"] == "unknown-tool"
    assert archive.status()["documents"]["total"] == 0  # nothing was written by a refusal


def test_serve_forwards_a_tool_call_and_answers_what_the_api_does(tmp_path):
    env = hermetic_env(tmp_path)
    lines = [
        {"id": 1, "method": "tool", "params": {"project": P, "sessionId": "s1", "host": "pi",
                                              "name": "context_window_archive", "arguments": {"text": "keep me"}}},
        {"id": 2, "method": "tool", "params": {"project": P, "sessionId": "s1", "host": "pi",
                                              "name": "context_recall", "arguments": {}}},
    ]  # fmt: skip
    completed = run_cwa(["serve"], env, stdin=b"".join(orjson.dumps(line) + b"\n" for line in lines))
    replies = [orjson.loads(line) for line in completed.stdout.splitlines()]
    assert replies[0]["result"]["text"].startswith("archived as doc-") and not replies[0]["result"]["isError"]
    assert (
        replies[1]["result"]["isError"] and "give exactly one of locator or documentId" in replies[1]["result"]["text"]
    )


def test_every_offered_tool_has_one_implementation_and_a_checkable_schema():
    assert set(agent_tools.TOOLS) == set(routing.tool_names())
    for name in routing.tool_names():
        assert (
            agent_tools.arguments_schema(name).fields.keys()
            == routing.guidance()["tools"][name]["parameters"]["properties"].keys()
        )
