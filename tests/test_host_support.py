"""What the agent hosts (the Pi extension, later MCP) need from the archive beyond the engine:
session-open with a verified lineage, settling with the messages after the last model call,
rendered search and recall, and the Pi settings edit behind `cwa pi install`."""

from __future__ import annotations

import json

import pytest
from session_helpers import PROJECT, Host, Transcript

from cwa.errors import Conflict, CwaError, InvalidRequest, LimitExceeded
from cwa.integrations import pi_settings
from cwa.retrieve import render


def test_session_open_records_the_lineage_farthest_first_and_refuses_contradictions(archive):
    opened = archive.call("session-open", {"project": PROJECT, "sessionId": "child", "lineage": ["parent", "root"]})
    assert opened == {"sessionId": "child", "lineage": ["parent", "root"], "archive": str(archive.path)}
    again = archive.call("session-open", {"project": PROJECT, "sessionId": "child", "lineage": ["parent"]})
    assert again["lineage"] == ["parent", "root"]  # a shorter view of the same chain changes nothing
    assert archive.call("session-open", {"project": PROJECT, "sessionId": "alone"})["lineage"] == []
    with pytest.raises(Conflict) as other:
        archive.call("session-open", {"project": PROJECT, "sessionId": "child", "lineage": ["stranger"]})
    assert other.value.details["reason"] == "lineage-mismatch"
    with pytest.raises(Conflict) as cycle:
        archive.call("session-open", {"project": PROJECT, "sessionId": "root", "lineage": ["child"]})
    assert cycle.value.details["reason"] == "lineage-cycle"
    with pytest.raises(LimitExceeded):
        archive.call("session-open", {"project": PROJECT, "sessionId": "x", "lineage": [f"s{n}" for n in range(17)]})
    with pytest.raises(InvalidRequest):
        archive.call("session-open", {"project": PROJECT, "sessionId": "x", "lineage": [""]})
    # nothing of a refused call is kept
    assert archive.call("session-open", {"project": PROJECT, "sessionId": "root"})["lineage"] == []


def test_settling_takes_the_messages_after_the_last_model_call(archive):
    transcript, host = Transcript(), Host(archive)
    transcript.user("where is the retry loop?")
    host.context(transcript)  # the model call: the engine has seen the question only
    transcript.assistant("In src/retry.py, function next_delay.")
    tail = transcript.messages[host.sent :]
    settled = archive.call(
        "session-settled", {"project": PROJECT, "sessionId": "live", "messages": tail, "baseDigest": host.digest}
    )
    assert len(settled["archived"]) == 1 and settled["count"] == 2
    assert "next_delay" in archive.get({"documentId": settled["archived"][0]})["text"]
    # the engine now holds both messages: the next call extends them with the digest it gave
    transcript.user("and the backoff?")
    answer = archive.call(
        "session-context", {**host.params(transcript.messages[2:]), "baseDigest": settled["digest"], "answer": "delta"}
    )
    assert answer["count"] == 3 and answer["delta"]["append"][-1]["content"] == "and the backoff?"
    with pytest.raises(Conflict) as stale:
        archive.call(
            "session-settled", {"project": PROJECT, "sessionId": "live", "messages": [], "baseDigest": host.digest}
        )
    assert stale.value.details["reason"] == "resync-required"


def test_search_and_recall_can_answer_with_the_text_a_model_reads(archive):
    archive.admit(
        {
            "project": PROJECT,
            "sessionId": "s",
            "kind": "turn",
            "messages": [{"role": "user", "text": "the ETIMEDOUT in tests/test_upload.py again"}],
        }
    )
    found = archive.call("search", {"project": PROJECT, "query": "ETIMEDOUT", "render": True})
    assert found["rendered"].startswith("[cwa archive | search: historical results")
    assert found["results"][0]["locator"] in found["rendered"]
    assert "rendered" not in archive.call("search", {"project": PROJECT, "query": "ETIMEDOUT"})
    recalled = archive.call("recall", {"project": PROJECT, "locator": found["results"][0]["locator"], "render": True})
    assert recalled["rendered"] == render.recall_result(
        {k: v for k, v in recalled.items() if k != "rendered"}, archive.clock()
    )
    assert json.dumps(recalled["text"])[1:-1] in recalled["rendered"]


def test_pi_settings_install_is_idempotent_keeps_other_settings_and_replaces_other_cwa_installs(tmp_path):
    env = {"HOME": str(tmp_path)}
    settings = tmp_path / ".pi" / "agent" / "settings.json"
    settings.parent.mkdir(parents=True)
    old = "/old/venv/lib/python3.11/site-packages/cwa/integrations/pi/extension.ts"
    settings.write_text(json.dumps({"theme": "dark", "extensions": ["/x/other.ts", old]}))
    first = pi_settings.install(None, env)
    assert first["changed"] is True and first["settings"] == str(settings)
    data = json.loads(settings.read_text())
    assert data == {"theme": "dark", "extensions": ["/x/other.ts", str(pi_settings.extension_path())]}
    assert pi_settings.install(None, env)["changed"] is False
    assert pi_settings.uninstall(None, env)["changed"] is True
    assert json.loads(settings.read_text()) == {"theme": "dark", "extensions": ["/x/other.ts"]}
    assert pi_settings.uninstall(None, env)["changed"] is False
    project = tmp_path / "proj"
    assert pi_settings.install(project, env)["settings"] == str(project / ".pi" / "settings.json")
    assert pi_settings.extension_path().is_file()


@pytest.mark.parametrize(
    "content, reason", [("[1]", "not-an-object"), ("{oops", "bad-json"), ('{"extensions": "x"}', "wrong-type")]
)
def test_pi_settings_that_cannot_be_read_are_typed_errors_and_left_alone(tmp_path, content, reason):
    settings = tmp_path / ".pi" / "agent" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(content)
    with pytest.raises(CwaError) as failed:
        pi_settings.install(None, {"HOME": str(tmp_path)})
    assert failed.value.details["reason"] == reason
    assert settings.read_text() == content
