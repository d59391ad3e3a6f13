"""A caller bound to one project cannot see or touch another project's documents: every method
that names a document answers another project's id exactly as it answers an id that never
existed, through cwa serve and through MCP."""

from __future__ import annotations

import json
import sys

import anyio
import orjson
from conftest import hermetic_env, run_cwa, turn
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client

from cwa.api import Archive

A, B = "/work/project-a", "/work/project-b"
UNKNOWN = "doc-0123456789abcdef0123"


def _answers(tmp_path, requests: list[dict]) -> list[dict]:
    lines = b"".join(orjson.dumps({"id": n, **r}) + b"\n" for n, r in enumerate(requests))
    done = run_cwa(["serve", "--no-background"], hermetic_env(tmp_path, tmp_path / "archive.db"), stdin=lines)
    assert done.returncode == 0, done.stderr
    return [orjson.loads(line) for line in done.stdout.splitlines()]


def _same_as_unknown(theirs: dict, unknown: dict, their_id: str) -> None:
    """`theirs` (about another project's document) reads exactly as `unknown` (an id that never
    existed), once the id each names is set aside."""
    assert json.dumps(theirs).replace(their_id, "ID") == json.dumps(unknown).replace(UNKNOWN, "ID")


def test_serve_answers_another_projects_document_as_an_unknown_id(tmp_path):
    with Archive.open(tmp_path / "archive.db") as archive:
        a1 = archive.admit(turn("project A's plan: ship on friday", project=A, session="a"))["documentId"]
        a2 = archive.admit(turn("project A's new plan: ship on monday", project=A, session="a"))["documentId"]
        b1 = archive.admit(turn("project B's own note", project=B, session="b"))["documentId"]
    methods = [
        ("get", lambda d: {"documentId": d}),
        ("get", lambda d: {"documentId": d, "range": {"start": 0, "end": 4}}),
        ("pin", lambda d: {"documentId": d}),
        ("unpin", lambda d: {"documentId": d}),
        ("protect", lambda d: {"clientId": "b-client", "documents": [{"documentId": d}]}),
        ("supersede", lambda d: {"documentId": d, "by": {"documentId": b1}}),
        ("supersede", lambda d: {"documentId": b1, "by": {"documentId": d}}),
        ("supersede", lambda d: {"documentId": d, "by": {"documentId": a2}}),  # both of A's
        ("recall", lambda d: {"documentId": d}),
        ("traverse", lambda d: {"documentId": d}),
        (
            "admit",
            lambda d: turn(
                "B tries to retire A's document", project=B, session="b", supersedes={"documentId": d, "version": 1}
            ),
        ),
    ]
    requests = []
    for method, params in methods:
        for target in (a1, UNKNOWN):
            request = {"project": B, **params(target)}
            requests.append({"method": method, "params": request})
    answers = _answers(tmp_path, requests)
    for number in range(0, len(answers), 2):
        theirs, unknown = answers[number], answers[number + 1]
        theirs.pop("id"), unknown.pop("id")
        _same_as_unknown(theirs, unknown, a1)
        assert "error" in theirs or theirs["result"]["status"] in ("missing", "locator-invalid"), theirs
    with Archive.open(tmp_path / "archive.db") as archive:  # nothing of A's changed
        assert archive.get({"documentId": a1})["state"] == "live"
        assert archive.get({"documentId": a1})["pinned"] is False
        assert archive.status({"archive": True})["archive"]["contextProtections"] == 0
        found = archive.search({"project": A, "query": "plan ship friday"})["results"]
        assert found and found[0]["documentId"] == a1


def _mcp(tmp_path, project: str):
    from mcp.client.stdio import StdioServerParameters

    env = hermetic_env(tmp_path, tmp_path / "archive.db") | {
        "CWA_PROJECT": project,
        "CWA_SESSION": f"{project}-s",
        "CWA_SEMANTIC_RETRIEVAL": "false",
    }
    return StdioServerParameters(command=sys.executable, args=["-m", "cwa", "mcp"], env=env)


def test_an_mcp_agent_cannot_retire_another_projects_document(tmp_path):
    async def tool(session, name, arguments):
        result = await session.call_tool(name, arguments)
        return result.content[0].text, result.structured_content, bool(result.is_error)

    async def scenario():
        async with stdio_client(_mcp(tmp_path, A)) as (read, write), ClientSession(read, write) as a:
            await a.initialize()
            _, first, _ = await tool(a, "context_window_archive", {"text": "A1: the deploy key rotates every 30 days"})
            _, second, _ = await tool(a, "context_window_archive", {"text": "A2: the deploy key rotates every 7 days"})
            a1, a2 = first["documentId"], second["documentId"]
            async with stdio_client(_mcp(tmp_path, B)) as (read_b, write_b), ClientSession(read_b, write_b) as b:
                await b.initialize()
                for arguments in ({"replacement": a2}, {"note": "B says A1 is wrong"}):
                    theirs = await tool(b, "context_window_supersede", {"documentId": a1, **arguments})
                    unknown = await tool(b, "context_window_supersede", {"documentId": UNKNOWN, **arguments})
                    assert theirs[2] and unknown[2], theirs  # both refused
                    assert theirs[0].replace(a1, "ID") == unknown[0].replace(UNKNOWN, "ID")
                    _same_as_unknown(theirs[1], unknown[1], a1)
                    assert theirs[1]["error"]["code"] == "not-found"
                for name, arguments in (
                    ("context_recall", {"documentId": a1}),
                    ("context_window_traverse", {"documentId": a1}),
                ):
                    theirs = await tool(b, name, arguments)
                    unknown = await tool(b, name, {**arguments, "documentId": UNKNOWN})
                    assert theirs[0].replace(a1, "ID") == unknown[0].replace(UNKNOWN, "ID"), (theirs, unknown)
            text, found, _ = await tool(a, "context_window_search", {"query": "deploy key rotates 30 days"})
            assert found["results"] and found["results"][0]["documentId"] == a1, text

    anyio.run(scenario)


def test_through_serve_every_method_that_names_a_document_must_name_the_project(tmp_path):
    from cwa.api import METHODS
    from cwa.contract import BOUND_PROJECT

    with Archive.open(tmp_path / "archive.db") as archive:
        a1 = archive.admit(turn("project A's plan", project=A, session="a"))["documentId"]
    bound = sorted(name for name, method in METHODS.items() if method.schema.fields.get("project") is BOUND_PROJECT)
    assert bound == ["get", "pin", "protect", "recall", "supersede", "unpin"]  # docs/contract.md names these
    requests = {
        "get": {"documentId": a1},
        "pin": {"documentId": a1},
        "unpin": {"documentId": a1},
        "protect": {"clientId": "c", "documents": [{"documentId": a1}]},
        "recall": {"documentId": a1},
        "supersede": {"documentId": a1, "by": {"documentId": a1}},
    }
    answers = _answers(tmp_path, [{"method": name, "params": requests[name]} for name in bound])
    for name, answer in zip(bound, answers, strict=True):
        assert answer["error"]["code"] == "invalid-request", (name, answer)
        assert answer["error"]["details"] == {"field": "project", "reason": "missing"}, (name, answer)
    with Archive.open(tmp_path / "archive.db") as archive:  # the owner's direct access: no project needed
        assert archive.get({"documentId": a1})["documentId"] == a1
        assert archive.conn.execute("SELECT count(*) FROM context_protections").fetchone()[0] == 0
