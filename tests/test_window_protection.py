"""Nothing a live window names may vanish: what the session engine archives and the provider copy
still names (previews, dedup markers, oversized inputs) stays readable while the session can show
it, and for its class's retention after it leaves the window — counted from then, never from the
messages' own (possibly old) timestamps."""

from __future__ import annotations

import orjson
from conftest import hermetic_env, hermetic_settings, run_cwa
from session_helpers import PROJECT, Host, Transcript
from test_lifecycle import Clock, expires_on, maintain_all, state

from cwa.api import Archive
from cwa.store.admission import document_ids_in

NOW = "2026-12-01T12:00:00.000Z"
YEAR_AGO = 1_763_000_000_000  # 2025-11-13 in epoch milliseconds: over a year before NOW


def _named(message: dict) -> list[str]:
    return document_ids_in(orjson.dumps(message).decode())


def test_an_old_sessions_externalized_output_survives_maintenance_through_serve(tmp_path):
    db = tmp_path / "archive.db"
    env = hermetic_env(tmp_path, db)
    transcript = Transcript(start=YEAR_AGO)
    transcript.user("run the whole test suite and show me everything")
    big = "".join(f"line {n:06d}: PASSED tests/test_module_{n % 97}.py::test_case_{n}\n" for n in range(12_000))
    assert len(big) > 700_000
    transcript.tool(big)
    transcript.assistant("All of it passed.")
    transcript.user("thanks")
    request = {
        "id": 1,
        "method": "session-context",
        "params": {
            "project": PROJECT,
            "sessionId": "old",
            "messages": transcript.messages,
            "model": {"contextWindow": 200_000, "maxTokens": 8_192},
        },
    }
    done = run_cwa(["serve", "--no-background"], env, stdin=orjson.dumps(request) + b"\n")
    answer = orjson.loads(done.stdout.splitlines()[0])["result"]
    previews = [m for m in answer["messages"] if m["role"] == "toolResult"]
    (doc_id,) = set(_named(previews[0]))  # the preview names the archived output
    swept = orjson.loads(run_cwa(["maintain", "--json"], env).stdout)
    assert swept["expired"] == 0 and swept["purged"] == 0  # before: expired 1, purged 1
    recalled = orjson.loads(
        run_cwa(
            ["call", "recall"],
            env,
            stdin=orjson.dumps({"project": PROJECT, "documentId": doc_id, "maxTokens": 200_000}),
        ).stdout
    )
    assert recalled["status"] == "resolved"  # before: expired
    text = run_cwa(["get", doc_id, "--text"], env).stdout.decode()
    assert big in text  # every byte, not 0 of them


def test_what_the_copy_names_lives_while_shown_and_its_class_days_after(tmp_path):
    clock = Clock(NOW)
    settings = hermetic_settings(tmp_path, CWA_ROTATION_TURNS="3", CWA_RETAIN_TURNS="1")
    with Archive.open(tmp_path / "archive.db", settings=settings, clock=clock) as archive:
        host = Host(archive, session="quiet")
        transcript = Transcript(start=YEAR_AGO)
        output = "\n".join(f"row {n}: value {n * 7}" for n in range(4_000))  # above 4,000 tokens
        transcript.user("dump the table")
        transcript.tool(output)
        transcript.assistant("Here it is.")
        transcript.user("dump it again")
        transcript.tool(output, arguments={"command": "again"})
        transcript.assistant("Same table.")
        first = {i for m in host.context(transcript) for i in _named(m)}
        assert len(first) == 2  # the preview's source, and the repeat's own archive (a dedup marker)

        def day(number: float, user: str | None = None, tool: str | None = None) -> set[str]:
            clock.at(number)
            if user:
                transcript.user(user)
            if tool:
                transcript.tool(tool, arguments={"command": user or "more"})
                transcript.assistant("Done.")
            named = {i for m in host.context(transcript) for i in _named(m)}
            maintain_all(archive)
            assert {state(archive, i) for i in named} <= {"live"}, number  # what is shown is readable
            return named

        for number in range(1, 10):  # a call a day; nothing of the messages' year-old dates counts
            day(number, user="day five: anything new?" if number == 5 else None)
        later = "\n".join(f"entry {n}: status {n % 3}" for n in range(5_000))
        shown = day(10, user="day ten: and now?", tool=later)  # rotation: the first two groups leave
        assert not shown & first and len(shown) == 1
        for number in range(11, 15):
            assert day(number) == shown
        last_call = 14
        # what the rotation dropped keeps the class's 14 days from when it left (day 10)
        expires_on(archive, clock, first, 10 + 14)
        # the session goes quiet: its protection holds 7 days after the last call, then 14 more
        expires_on(archive, clock, shown, last_call + 7 + 14)
