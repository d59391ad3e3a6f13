"""`cwa mcp` through the MCP SDK's own client over stdio, and `cwa mcp install`."""

from __future__ import annotations

import json
import sys

import anyio
import pytest
from conftest import hermetic_env
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from cwa import routing
from cwa.integrations import mcp_clients

PROJECT = "/work/mcp-project"


def server(tmp_path, session: str) -> StdioServerParameters:
    env = hermetic_env(tmp_path, tmp_path / "archive.db") | {
        "CWA_PROJECT": PROJECT,
        "CWA_SESSION": session,
        "CWA_SEMANTIC_RETRIEVAL": "false",
    }
    return StdioServerParameters(command=sys.executable, args=["-m", "cwa", "mcp"], env=env)


async def _tool(session: ClientSession, name: str, arguments: dict) -> tuple[str, dict, bool]:
    result = await session.call_tool(name, arguments)
    return result.content[0].text, result.structured_content, bool(result.is_error)


def test_tools_instructions_archive_search_recall_and_gather(tmp_path):
    async def scenario():
        async with stdio_client(server(tmp_path, "s1")) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.instructions == routing.guidelines_text()
            listed = {t.name: t for t in (await session.list_tools()).tools}
            assert sorted(listed) == sorted(routing.tool_names("mcp")) and "context_window_status" in listed
            assert (
                listed["context_window_gather"].input_schema
                == routing.guidance()["tools"]["context_window_gather"]["parameters"]
            )
            text, first, failed = await _tool(
                session,
                "context_window_archive",
                {
                    "text": "Decision: payment retries stop after 5 attempts (see src/payments/retry.py).",
                    "type": "decision",
                    "subjectKey": "payment-retries",
                },
            )
            assert not failed and text.startswith("archived as doc-")
            _, second, _ = await _tool(
                session,
                "context_window_archive",
                {"text": "Decision: payment retries stop after 3 attempts.", "subjectKey": "payment-retries"},
            )
            assert second["documentId"] == first["documentId"] and second["version"] == 2
            await _tool(
                session,
                "context_window_archive",
                {
                    "messages": [
                        {"role": "user", "text": "why does src/payments/retry.py sleep so long?"},
                        {"role": "assistant", "text": "Because of the exponential backoff cap of 30 s."},
                    ]
                },
            )
            text, found, failed = await _tool(session, "context_window_search", {"query": "src/payments/retry.py"})
            assert not failed and text.startswith("[cwa archive | search: historical results")
            assert found["results"] and all(
                r["documentId"] != first["documentId"] or r["version"] == 2 for r in found["results"]
            )
            text, recalled, failed = await _tool(session, "context_recall", {"locator": found["results"][0]["locator"]})
            assert not failed and recalled["status"] == "resolved"
            assert json.dumps(recalled["text"])[1:-1] in text  # the exact bytes, quoted as data
            text, gathered, failed = await _tool(
                session, "context_window_gather", {"query": "backoff cap payment retries"}
            )
            assert not failed and any("30 s" in item["text"] for item in gathered["items"])
            text, status, failed = await _tool(session, "context_window_status", {})
            assert not failed and status["documents"]["total"] >= 3 and "Session s1" in text

    anyio.run(scenario)


def test_bad_arguments_are_tool_errors_and_the_server_keeps_answering(tmp_path):
    async def scenario():
        async with stdio_client(server(tmp_path, "s1")) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            cases = [
                ("context_window_search", {"bogus": 1}, "unknown-field"),
                ("context_window_search", {"query": 5}, "wrong-type"),
                ("context_window_search", {}, "missing"),
                ("context_recall", {"locator": "x", "documentId": "doc-1"}, "missing"),
                ("context_window_gather", {"query": "x", "intent": "everything"}, "not-allowed"),
                ("context_window_gather", {"query": "x", "maxTokens": 10}, "out-of-range"),
                ("context_window_traverse", {"cursor": "cwa1t.forged.sig"}, None),
                ("no_such_tool", {}, "unknown-tool"),
            ]
            for name, arguments, reason in cases:
                text, details, failed = await _tool(session, name, arguments)
                if reason is None:  # a forged cursor is an answer (status cursor-invalid), not an error
                    assert not failed and details["status"] == "cursor-invalid"
                    continue
                assert failed and text.startswith("cwa invalid-request"), (name, arguments, text)
                assert details["error"]["details"]["reason"] == reason
            _, status, failed = await _tool(session, "context_window_status", {})
            assert not failed and status["documents"]["total"] == 0  # nothing was written by a refusal

    anyio.run(scenario)


def test_two_clients_on_one_archive_at_once(tmp_path):
    async def client(session_id: str, results: dict) -> None:
        async with stdio_client(server(tmp_path, session_id)) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            ids = []
            for number in range(15):
                _, done, failed = await _tool(
                    session,
                    "context_window_archive",
                    {
                        "text": f"{session_id} note {number}: the cache TTL of service-{session_id}-{number} is {number} s"
                    },
                )
                assert not failed
                ids.append(done["documentId"])
            results[session_id] = ids

    async def scenario():
        results: dict = {}
        async with anyio.create_task_group() as group:
            group.start_soon(client, "alpha", results)
            group.start_soon(client, "beta", results)
        async with stdio_client(server(tmp_path, "gamma")) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            _, status, _ = await _tool(session, "context_window_status", {})
            assert status["documents"]["total"] == 30 and status["sessions"] == 2
            _, found, _ = await _tool(session, "context_window_search", {"query": "service-beta-7"})
            assert found["results"][0]["documentId"] == results["beta"][7]

    anyio.run(scenario)


@pytest.mark.parametrize("client", mcp_clients.CLIENTS)
def test_install_prints_or_merges_the_entry_idempotently(tmp_path, client):
    env = {"HOME": str(tmp_path / "home")}
    project = tmp_path / "project"
    project.mkdir()
    path = mcp_clients.config_file(client, project, env)
    path.parent.mkdir(parents=True, exist_ok=True)
    if client == "codex":
        path.write_text(
            'model = "x"\n\n[mcp_servers.other]\ncommand = "other"\n\n[mcp_servers.cwa]\ncommand = "old"\n'
            'args = []\n\n[profiles.fast]\nmodel = "y"\n'
        )
    else:
        section = "mcpServers" if client == "claude" else "mcp"
        path.write_text(json.dumps({"keep": True, section: {"other": {"command": "other"}}}))
    printed = mcp_clients.install(client, project, env, write=False)
    assert printed["written"] is False and printed["changed"] is True and "mcp" in printed["entry"]
    assert mcp_clients.install(client, project, env, write=True)["written"] is True
    assert mcp_clients.install(client, project, env, write=True)["changed"] is False
    text = path.read_text()
    if client == "codex":
        import tomllib

        data = tomllib.loads(text)
        assert data["model"] == "x" and data["profiles"]["fast"]["model"] == "y"
        assert data["mcp_servers"]["other"]["command"] == "other"
        assert data["mcp_servers"]["cwa"] == {"command": sys.executable, "args": ["-P", "-m", "cwa", "mcp"]}
    else:
        data = json.loads(text)
        section = data["mcpServers"] if client == "claude" else data["mcp"]
        assert data["keep"] is True and section["other"] == {"command": "other"}
        command = section["cwa"]["command"]
        assert (command if client == "opencode" else [command, *section["cwa"]["args"]]) == mcp_clients.command()


def test_a_config_file_that_is_not_json_is_a_typed_error_and_left_alone(tmp_path):
    from cwa.errors import InvalidRequest

    (tmp_path / ".mcp.json").write_text("{oops")
    with pytest.raises(InvalidRequest):
        mcp_clients.install("claude", tmp_path, {"HOME": str(tmp_path)}, write=True)
    assert (tmp_path / ".mcp.json").read_text() == "{oops"


class RawFrames:
    """`cwa mcp` driven by raw JSON-RPC lines (what a client's SDK would never send)."""

    def __init__(self, tmp_path, project: str = PROJECT, command: list[str] | None = None) -> None:
        import subprocess

        params = server(tmp_path, "raw")
        self.process = subprocess.Popen(
            command or [params.command, *params.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**params.env, "CWA_PROJECT": project},
        )
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        )
        assert self.reply()["id"] == 0
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, frame) -> None:
        self.process.stdin.write((frame if isinstance(frame, bytes) else json.dumps(frame).encode()) + b"\n")
        self.process.stdin.flush()

    def reply(self, timeout: float = 20) -> dict | None:
        import select

        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        return json.loads(self.process.stdout.readline()) if ready else None

    def close(self) -> None:
        self.process.stdin.close()
        assert self.process.wait(timeout=30) == 0


def _nested(depth: int) -> dict:
    value: object = "leaf"
    for _ in range(depth):
        value = {"d": value}
    return value


def test_malformed_frames_get_the_json_rpc_error_the_spec_names(tmp_path):
    call = {"jsonrpc": "2.0", "method": "tools/call"}
    cases = [  # (frame, JSON-RPC code, id in the reply)
        (b"{not json", -32700, None),
        (
            b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"context_window_search",'
            b'"arguments":{"query":"\\ud800"}}}',
            -32700,
            None,
        ),  # a lone surrogate
        (b"[1, 2]", -32600, None),
        ({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}, -32600, 1),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}, -32600, None),
        ({"jsonrpc": "2.0", "id": 3}, -32600, 3),
        ({**call, "id": 4, "params": [1, 2]}, -32602, 4),
        ({**call, "id": 6, "params": {"name": "context_window_search", "arguments": _nested(300)}}, -32602, 6),
        ({**call, "id": 7, "params": {"name": "context_window_search", "arguments": "query"}}, -32602, 7),
        ({**call, "id": 8, "params": {"name": "context_window_search", "arguments": ["query"]}}, -32602, 8),
        ({**call, "id": 9, "params": {"arguments": {}}}, -32602, 9),
    ]
    raw = RawFrames(tmp_path)
    try:
        for frame, code, expected_id in cases:
            raw.send(frame)
            reply = raw.reply()
            assert reply is not None, frame  # before: no reply at all, and the client hung
            assert reply["error"]["code"] == code and reply["id"] == expected_id, (frame, reply)
            assert reply["error"]["data"]["code"] == "invalid-request"
        raw.send({"jsonrpc": "2.0", "id": 99, "method": "ping"})
        assert raw.reply() == {"jsonrpc": "2.0", "id": 99, "result": {}}
    finally:
        raw.close()


def test_what_the_model_reads_is_words_never_python_reprs(tmp_path):
    reprs = ("None", "{'", "'}", "=None", "True", "False")

    async def scenario():
        async with stdio_client(server(tmp_path, "s1")) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            _, old, _ = await _tool(session, "context_window_archive", {"text": "the queue holds 40 jobs"})
            _, new, _ = await _tool(session, "context_window_archive", {"text": "the queue now holds 80 jobs"})
            await _tool(
                session, "context_window_supersede", {"documentId": old["documentId"], "replacement": new["documentId"]}
            )
            big = "\n".join(f"step {n}: compile module_{n} and link it against libcore" for n in range(2_000))
            _, large, _ = await _tool(session, "context_window_archive", {"text": big})
            texts = {}
            texts["superseded"], _, _ = await _tool(session, "context_recall", {"documentId": old["documentId"]})
            texts["missing"], _, _ = await _tool(session, "context_recall", {"documentId": "doc-00000000000000000000"})
            texts["small budget"], details, _ = await _tool(
                session, "context_recall", {"documentId": large["documentId"], "maxTokens": 39}
            )
            texts["null limit"], _, failed = await _tool(
                session, "context_window_search", {"query": "queue", "limit": None}
            )
            assert failed
            for name, text in texts.items():
                assert not any(marker in text for marker in reprs), (name, text)
            assert f"replaced by {new['documentId']} v1" in texts["superseded"]
            assert "no document doc-00000000000000000000" in texts["missing"]
            assert details["materialization"] == "table-of-contents" and details["text"] == ""
            assert "table of contents" in texts["small budget"] and "bytes 0.." in texts["small budget"]
            assert '\n""' not in texts["small budget"]  # before: an empty quoted text, the contents hidden
            assert "limit must be an integer, not null" in texts["null limit"]

    anyio.run(scenario)


def test_install_keeps_the_users_keys_names_the_archive_and_offers_user_scope(tmp_path):
    env = {"HOME": str(tmp_path / "home"), "CODEX_HOME": str(tmp_path / "codex")}
    project = tmp_path / "project"
    project.mkdir()
    db = tmp_path / "elsewhere" / "a.db"
    claude = project / ".mcp.json"
    claude.write_text(json.dumps({"mcpServers": {"cwa": {"command": "old", "env": {"CWA_PROJECT": "p1"}}}}))
    mcp_clients.install("claude", project, env, write=True, db=db)
    entry = json.loads(claude.read_text())["mcpServers"]["cwa"]
    assert entry["env"] == {"CWA_PROJECT": "p1"}  # the user's key is kept
    assert [entry["command"], *entry["args"]] == [sys.executable, "-P", "-m", "cwa", "--db", str(db), "mcp"]

    codex = tmp_path / "codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_text('[mcp_servers.cwa]\ncommand = "old"\nstartup_timeout_sec = 30\n\n[other]\nx = 1\n')
    mcp_clients.install("codex", project, env, write=True, db=db)
    import tomllib

    data = tomllib.loads(codex.read_text())
    assert data["mcp_servers"]["cwa"]["startup_timeout_sec"] == 30 and data["other"] == {"x": 1}
    assert data["mcp_servers"]["cwa"]["args"] == ["-P", "-m", "cwa", "--db", str(db), "mcp"]
    assert mcp_clients.install("codex", project, env, write=True, db=db)["changed"] is False

    user = mcp_clients.install("claude", project, env, write=True, scope="user")
    assert user["config"] == str(tmp_path / "home" / ".claude.json")
    assert json.loads((tmp_path / "home" / ".claude.json").read_text())["mcpServers"]["cwa"]["args"] == [
        "-P",
        "-m",
        "cwa",
        "mcp",
    ]


def test_a_config_toml_that_is_not_toml_is_refused_and_left_alone(tmp_path):
    from cwa.errors import InvalidRequest

    codex = tmp_path / "config.toml"
    codex.write_text("model = [unclosed\n")
    with pytest.raises(InvalidRequest) as refused:
        mcp_clients.install("codex", tmp_path, {"CODEX_HOME": str(tmp_path)}, write=True)
    assert refused.value.details["reason"] == "bad-toml" and codex.read_text() == "model = [unclosed\n"


# `cwa mcp` as it runs where the MCP SDK (and its pydantic and anyio) cannot be imported
WITHOUT_SDK = (
    "import sys; sys.modules.update(dict.fromkeys(('mcp', 'mcp_types', 'pydantic', 'anyio')));"
    "from cwa.cli import main; sys.argv = ['cwa', *sys.argv[1:]]; main()"
)


def test_the_server_and_its_install_need_no_mcp_sdk(tmp_path):
    import subprocess

    env = server(tmp_path, "bare").env
    installed = subprocess.run(
        [sys.executable, "-c", WITHOUT_SDK, "mcp", "install", "opencode", "--write", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert installed.returncode == 0 and json.loads(installed.stdout)["written"], installed.stderr
    raw = RawFrames(tmp_path, command=[sys.executable, "-c", WITHOUT_SDK, "mcp"])
    try:
        raw.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert "context_window_search" in {t["name"] for t in raw.reply()["result"]["tools"]}
        raw.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "context_window_archive", "arguments": {"text": "the cache TTL is 40 s"}},
            }
        )
        archived = raw.reply()["result"]
        assert not archived["isError"] and archived["structuredContent"]["documentId"].startswith("doc-")
        assert archived["content"] == [{"type": "text", "text": archived["content"][0]["text"]}]
    finally:
        raw.close()


def test_a_client_probing_the_stateless_era_falls_back_to_the_handshake(tmp_path):
    from mcp import Client

    async def scenario():
        async with Client(server(tmp_path, "s1")) as client:  # mode auto: server/discover first
            assert client.session.initialize_result is not None
            tools = await client.list_tools()
            assert "context_window_status" in {t.name for t in tools.tools}
            result = await client.call_tool("context_window_archive", {"text": "probe then handshake"})
            assert not result.is_error and result.structured_content["version"] == 1

    anyio.run(scenario)
    raw = RawFrames(tmp_path)
    try:
        raw.send({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}})
        reply = raw.reply()
        assert reply["error"]["code"] == -32601 and reply["error"]["data"]["reason"] == "unknown"
    finally:
        raw.close()


def test_a_cancelled_call_gets_no_answer_and_the_server_goes_on(tmp_path):
    big = "\n".join(f"line {n}: compile module_{n} and link it against libcore" for n in range(16_000))
    call = {"name": "context_window_archive", "arguments": {"text": big}}
    raw = RawFrames(tmp_path)
    try:
        raw.send(
            b"\n".join(
                json.dumps(frame).encode()
                for frame in (
                    {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": call},
                    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}},
                    {"jsonrpc": "2.0", "id": 6, "method": "ping"},
                )
            )
        )
        first = raw.reply()
        assert first["id"] == 6, str(first)[:600]  # answered while the cancelled call may still run
        raw.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "context_window_status"}})
        assert raw.reply()["id"] == 7  # calls take turns: a reply to 5 would have come first
        raw.send({"jsonrpc": "2.0", "id": 8, "method": "ping"})
        assert raw.reply()["id"] == 8
    finally:
        raw.close()
