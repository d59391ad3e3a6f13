"""`cwa doctor`: health checks that fail on real damage, and repairs of what derived data can fix."""

from __future__ import annotations

import os
import stat

import orjson

from cwa.api import Archive
from cwa.config import load_settings
from conftest import hermetic_env, run_cwa, turn


def _doctor(tmp_path, *args):
    done = run_cwa(["doctor", "--json", *args], hermetic_env(tmp_path, tmp_path / "archive" / "archive.db"))
    return done.returncode, orjson.loads(done.stdout)


def _failing(report) -> set[str]:
    return {c["name"] for c in report["checks"] if not c["ok"]}


def test_a_healthy_archive_passes_every_check(archive, tmp_path):
    archive.admit(turn("the deploy script lives in ops/deploy.sh"))
    code, report = _doctor(tmp_path)
    assert code == 0 and report["healthy"] is True and _failing(report) == set()
    names = [c["name"] for c in report["checks"]]
    assert names == ["integrity", "schema", "canonical-digests", "derived-index", "window-counts",
                     "checkpoint-parts", "permissions", "disk"]


def test_lost_derived_rows_are_found_and_repaired_in_batches(archive, tmp_path):
    admitted = archive.admit(turn("the flaky upload test fails with ETIMEDOUT"))
    archive.admit(turn("release notes for version 2", session="s2"))  # no context from the first
    archive.conn.execute("DELETE FROM anchors")
    archive.conn.execute("DELETE FROM windows WHERE document_row = (SELECT id FROM documents WHERE document_id = ?)",
                         (admitted["documentId"],))
    assert archive.search({"project": "/work/p", "query": "ETIMEDOUT", "semanticPolicy": "never"})["results"] == []
    code, report = _doctor(tmp_path)
    assert code == 1 and {"derived-index", "window-counts"} <= _failing(report)
    assert all(c["repairable"] for c in report["checks"] if c["name"] in ("derived-index", "window-counts"))
    code, report = _doctor(tmp_path, "--repair")
    assert code == 0 and report["healthy"] and any("derived-index" in r for r in report["repaired"])
    found = archive.search({"project": "/work/p", "query": "ETIMEDOUT", "semanticPolicy": "never"})["results"]
    assert [r["documentId"] for r in found] == [admitted["documentId"]]


def test_damaged_canonical_bytes_are_reported_and_never_called_repaired(archive, tmp_path):
    archive.admit(turn("exact words that must come back byte for byte"))
    archive.conn.execute("UPDATE chunks SET data = CAST(replace(CAST(data AS TEXT), 'exact', 'EXACT') AS BLOB)")
    code, report = _doctor(tmp_path, "--repair")
    assert code == 1 and "canonical-digests" in _failing(report)
    check = next(c for c in report["checks"] if c["name"] == "canonical-digests")
    assert check["repairable"] is False and check["documents"]


def test_orphan_checkpoint_parts_are_reported_and_expired_past_the_grace_period(tmp_path):
    now = ["2026-11-01T10:00:00.000Z"]
    with Archive.open(tmp_path / "a.db", clock=lambda: now[0]) as archive:
        archive.admit({"project": "/work/p", "sessionId": "s", "kind": "checkpoint-part",
                       "messages": [{"key": "checkpoint:abc:0", "role": "user", "text": "half of an input"}]})
        report = archive.call("doctor", {})
        assert report["healthy"] is False and "checkpoint-parts" in _failing(report)
        now[0] = "2026-11-03T10:00:00.000Z"
        repaired = archive.call("doctor", {"repair": True})
        assert repaired["healthy"] is True and any("1 orphan" in r for r in repaired["repaired"])


def test_archive_files_opened_to_others_are_tightened(archive, tmp_path):
    archive.admit(turn("private notes"))
    path = tmp_path / "archive" / "archive.db"
    os.chmod(path, 0o644)
    code, report = _doctor(tmp_path)
    assert code == 1 and _failing(report) == {"permissions"}
    code, report = _doctor(tmp_path, "--repair")
    assert code == 0 and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_disk_below_the_guard_is_unhealthy(tmp_path):
    guard = load_settings(None, env={"CWA_DISK_CRITICAL_MEBIBYTES": str(1 << 30)})  # more than any disk has
    with Archive.open(tmp_path / "a.db", settings=guard) as archive:
        report = archive.call("doctor", {})
    assert "disk" in _failing(report) and "disk-low" in next(c for c in report["checks"] if c["name"] == "disk")["detail"]
