"""`cwa evidence`: an aggregate-only record of a verification run, and `verify`, which rejects a
record holding anything more (one test per kind of rejection)."""

from __future__ import annotations

import copy
import json

import pytest
from conftest import hermetic_env, run_cwa, turn

SECRET_TEXT = "SENTINEL-PROMPT the vault password rotation plan is in /home/alice/notes.txt"


@pytest.fixture
def record(archive, tmp_path) -> dict:
    archive.admit(turn(SECRET_TEXT, session="01a22dd0-0e03-7531-a12e-60731bbbad6a"))
    archive.admit(turn("the deploy script lives in ops/deploy.sh"))
    out = tmp_path / "evidence.json"
    done = run_cwa(
        ["evidence", "--out", str(out), "--no-gates"], hermetic_env(tmp_path, tmp_path / "archive" / "archive.db")
    )
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(out.read_text())


def _verify(tmp_path, data: dict, **env: str):
    path = tmp_path / "candidate.json"
    path.write_text(json.dumps(data))
    done = run_cwa(["evidence", "verify", str(path), "--json"], hermetic_env(tmp_path) | env)
    return done.returncode, json.loads(done.stdout)


def test_the_record_holds_aggregates_only_and_verifies_clean(record, tmp_path):
    text = json.dumps(record)
    for secret in ("SENTINEL-PROMPT", "alice", "01a22dd0", "ops/deploy.sh", str(tmp_path), "doc-", "k-"):
        assert secret not in text
    assert record["archive"]["documents"]["total"] == 2 and record["schemaVersion"] >= 9
    assert len(record["sourceBlake3"]) == 64 and record["versions"]["sqlite"]
    assert {c["name"] for c in record["checks"]} == {"doctor", "status"}
    assert record["passed"] is True
    assert _verify(tmp_path, record) == (0, {"clean": True, "findings": []})


@pytest.mark.parametrize(
    "field, value, reason",
    [
        ("note", "please fix the retry loop in the uploader\nand tell me when it passes", "free text"),
        ("note", "x" * 200, "free text"),
        ("host", "corp-internal-4711", "an environment value"),
        ("token", "sk-abcdefghijklmnopqrstuvwx123456", "a credential-like string"),
        ("token", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "a credential-like string"),
        ("login", "password=hunter2hunter2", "a credential-like string"),
        ("owner", "/home/alice", "a home directory or user name"),
        ("owner", "~alice", "a home directory or user name"),
        ("where", "/var/lib/cwa/archive.db", "an absolute path"),
        ("session", "01a22dd0-0e03-7531-a12e-60731bbbad6a", "a session id"),
        ("sessionId", "pi-session-7", "a session id"),
        ("key", "k-0123456789abcdef0123456789abcdef", "a raw database key (a message key)"),
        ("id", "doc-0123456789abcdef0123", "a raw database key (a document id)"),
        ("locator", "cwa1AbCdEfGhIjKlMnOpQrStUvWxYz012345", "a raw database key (a locator or cursor)"),
        ("archiveId", "3eccf65b828286a522b66fddcd786572", "a raw database key (a raw hex key)"),
    ],
)
def test_verify_rejects_each_kind_of_leak(record, tmp_path, field, value, reason):
    planted = copy.deepcopy(record)
    planted["checks"][0][field] = value
    code, report = _verify(tmp_path, planted, CWA_TEST_PLANTED="corp-internal-4711")
    assert code == 1 and report["clean"] is False
    assert any(f["path"] == f"$.checks[0].{field}" and reason in f["reason"] for f in report["findings"]), report


def test_hex_digests_are_allowed_only_under_a_hash_field(record, tmp_path):
    planted = copy.deepcopy(record)
    planted["checks"][0]["resultBlake3"] = "ab" * 32
    assert _verify(tmp_path, planted)[0] == 0
    planted["checks"][0]["result"] = "ab" * 32
    assert _verify(tmp_path, planted)[0] == 1


def test_a_file_that_is_not_a_record_is_rejected(tmp_path):
    code, report = _verify(tmp_path, {"hello": "world"})
    assert code == 1 and report["findings"][0]["reason"] == "not a cwa-evidence record"
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    done = run_cwa(["evidence", "verify", str(broken)], hermetic_env(tmp_path))
    assert done.returncode == 2 and b"Traceback" not in done.stderr
