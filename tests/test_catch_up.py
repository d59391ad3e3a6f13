"""A host's first full send of a long transcript: answered with one cut instead of a replay of
every rotation, the history before the cut archived between requests (packed into few turn
documents), nothing lost when the process is killed meanwhile."""

from __future__ import annotations

import signal
import time

from conftest import hermetic_settings
from session_helpers import Serve

from cwa.api import Archive
from cwa.session.engine import CATCH_UP_MESSAGES
from cwa_eval.perf.first_send import transcript

PROJECT = "/work/long"


def _context(serve: Serve, messages: list[dict]) -> dict:
    return serve.call(
        "session-context",
        {
            "project": PROJECT,
            "sessionId": "long",
            "messages": messages,
            "model": {"contextWindow": 200_000, "maxTokens": 8_192},
        },
    )


def _archived(tmp_path) -> tuple[int, int]:
    with Archive.open(tmp_path / "archive.db") as archive:
        conn = archive.conn
        return (
            conn.execute("SELECT count(*) FROM session_turns").fetchone()[0],
            conn.execute("SELECT count(*) FROM documents WHERE kind = 'turn'").fetchone()[0],
        )


def test_a_long_first_send_is_cut_once_and_its_history_archived_between_requests(tmp_path):
    messages = transcript(6_000)
    assert len(messages) > CATCH_UP_MESSAGES
    serve = Serve(tmp_path)
    answer = _context(serve, messages)
    rotated = next(e for e in answer["events"] if e["type"] == "rotated")
    assert rotated["reason"] == "catch-up" and rotated["retainedGroups"] == 5
    assert len(answer["messages"]) == 12  # five kept turns and the latest one
    assert answer["messages"][-1]["content"] == messages[-1]["content"]
    waiting = [serve.call("session-status", {"project": PROJECT, "sessionId": "long"})["backlogMessages"]]
    while waiting[-1]:  # answered between slices of archiving, the backlog only shrinks
        assert len(waiting) < 600, "the history was not archived within a minute"
        time.sleep(0.1)
        waiting.append(serve.call("session-status", {"project": PROJECT, "sessionId": "long"})["backlogMessages"])
    assert waiting[0] <= rotated["backlogMessages"] and waiting == sorted(waiting, reverse=True)
    found = serve.call("search", {"project": PROJECT, "query": "widget-12", "semanticPolicy": "never"})
    recalled = serve.call("recall", {"project": PROJECT, "locator": found["results"][0]["locator"]})
    assert "look at widget-12\n" in recalled["text"]
    serve.child.stdin.close()
    assert serve.child.wait(60) == 0
    groups, documents = _archived(tmp_path)
    assert groups == rotated["removedGroups"] == 2_994 and documents <= 2_994 * 2 // 256 + 2  # packed


def test_history_left_unarchived_by_a_killed_process_is_archived_on_the_next_first_send(tmp_path):
    messages = transcript(6_000)
    first = Serve(tmp_path)
    rotated = next(e for e in _context(first, messages)["events"] if e["type"] == "rotated")
    first.child.send_signal(signal.SIGKILL)  # right after answering: the history is (mostly) not archived yet
    first.child.wait(30)
    second = Serve(tmp_path)
    again = _context(second, messages)
    assert [e for e in again["events"] if e["type"] == "rotated"] == []  # the stored cut: no new rotation
    second.child.stdin.close()  # end of input: what is left is archived before the process ends
    assert second.child.wait(120) == 0
    groups, documents = _archived(tmp_path)
    assert groups == rotated["removedGroups"]
    with Archive.open(tmp_path / "archive.db") as archive:  # each early message archived, once
        twice = archive.conn.execute(
            "SELECT count(*) FROM (SELECT m.message_key FROM messages AS m JOIN documents AS d ON d.id = m.document_row "
            "WHERE d.kind = 'turn' GROUP BY m.message_key HAVING count(*) > 1)"
        ).fetchone()[0]
        archived = archive.conn.execute(
            "SELECT count(*) FROM messages AS m JOIN documents AS d ON d.id = m.document_row WHERE d.kind = 'turn'"
        )
        assert twice == 0 and archived.fetchone()[0] == 2 * rotated["removedGroups"]


def test_a_long_epoch_already_seen_is_rebuilt_exactly_not_cut(tmp_path):
    """Catch-up is for messages no engine has seen: a fresh process given a long epoch it decided
    before (more than CATCH_UP_MESSAGES messages) rebuilds the very same provider copy."""
    from session_helpers import Host, Transcript

    settings = hermetic_settings(tmp_path, CWA_SEMANTIC_RETRIEVAL="false", CWA_ROTATION_TURNS="1000")
    big_window = {"id": "m", "provider": "p", "contextWindow": 1_000_000, "maxTokens": 8_192}
    transcript = Transcript()
    with Archive.open(tmp_path / "archive.db", settings=settings) as archive:
        host = Host(archive, session="seen", model=big_window)
        for number in range(CATCH_UP_MESSAGES // 2 + 10):  # two messages a turn
            transcript.turn(f"question {number} about gadget-{number}", f"gadget-{number} answer")
            if number % 50 == 0:
                host.context(transcript)
        copy = host.context(transcript)
        assert len(copy) > CATCH_UP_MESSAGES
    with Archive.open(tmp_path / "archive.db", settings=settings) as restarted:  # a fresh process
        again = Host(restarted, session="seen", model=big_window).full(transcript)
        assert again["messages"] == copy and not [e for e in again["events"] if e["type"] == "rotated"]
