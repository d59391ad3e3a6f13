"""`cwa doctor`: health checks that fail on real damage, and repairs of what derived data can fix."""

from __future__ import annotations

import os
import stat

import orjson
import pytest
from conftest import hermetic_env, run_cwa, turn

from cwa.api import Archive
from cwa.config import load_settings
from cwa.errors import ArchiveCorrupt


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
    assert names == [
        "integrity",
        "schema",
        "canonical-chunks",
        "canonical-digests",
        "derived-index",
        "window-counts",
        "window-ranges",
        "checkpoint-parts",
        "permissions",
        "disk",
        "hooks",
    ]


def test_a_range_that_would_hide_windows_from_search_is_found_and_repaired(archive, tmp_path):
    # Search scores only the ids within a project's kept range: a range narrower than the
    # project's windows loses the ones outside it, which doctor names and a rebuild recomputes.
    for n in range(3):
        archive.admit(turn(f"gateway note {n}", session=f"s{n}"))
    archive.admit(turn("gateway elsewhere", project="/work/q"))
    assert len(archive.search({"project": "/work/p", "query": "gateway", "semanticPolicy": "never"})["results"]) == 3
    archive.conn.execute("UPDATE project_window_spans SET high = high - 1 WHERE project_row = 1")
    assert len(archive.search({"project": "/work/p", "query": "gateway", "semanticPolicy": "never"})["results"]) == 2
    code, report = _doctor(tmp_path)
    ranges = next(c for c in report["checks"] if c["name"] == "window-ranges")
    assert code == 1 and not ranges["ok"] and ranges["repairable"] and ranges["narrow"] == ["/work/p"]
    assert ranges["shared"] == 0  # each project's windows in a block of its own
    code, report = _doctor(tmp_path, "--repair")
    assert code == 0 and report["healthy"] and any("derived-index" in r for r in report["repaired"])
    assert len(archive.search({"project": "/work/p", "query": "gateway", "semanticPolicy": "never"})["results"]) == 3


def test_lost_derived_rows_are_found_and_repaired_in_batches(archive, tmp_path):
    admitted = archive.admit(turn("the flaky upload test fails with ETIMEDOUT"))
    archive.admit(turn("release notes for version 2", session="s2"))  # no context from the first
    archive.conn.execute("DELETE FROM anchors")
    archive.conn.execute(
        "DELETE FROM windows WHERE document_row = (SELECT id FROM documents WHERE document_id = ?)",
        (admitted["documentId"],),
    )
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
    archive.conn.execute(  # the altered bytes stored whole (a payload of their length is read as it is)
        "UPDATE chunks SET data = CAST(replace(CAST(sqlar_uncompress(data, byte_length) AS TEXT), 'exact', 'EXACT') AS BLOB)"
    )
    code, report = _doctor(tmp_path, "--repair")
    assert code == 1 and "canonical-digests" in _failing(report)
    check = next(c for c in report["checks"] if c["name"] == "canonical-digests")
    assert check["repairable"] is False and check["documents"]


def _texts(archive, count: int) -> list[str]:
    ids = [
        archive.admit(
            turn(
                f"note {n}: " + "the build cache lives in .cache/build and is keyed by lockfile " * 40, session=f"s{n}"
            )
        )["documentId"]
        for n in range(count)
    ]
    return ids


def test_every_chunk_is_checked_and_damage_is_never_rebuilt_into_the_indexes(archive, tmp_path):
    ids = _texts(archive, 8)
    # three chunks altered in place: no sample is needed to find them, and no repair hides them
    archive.conn.execute(
        "UPDATE chunks SET data = CAST(replace(CAST(sqlar_uncompress(data, byte_length) AS TEXT), 'cache', 'CACHE') AS BLOB) "
        "WHERE id IN (SELECT id FROM chunks ORDER BY id LIMIT 3)"
    )
    code, report = _doctor(tmp_path, "--sample", "1")
    assert code == 1 and "canonical-chunks" in _failing(report)
    check = next(c for c in report["checks"] if c["name"] == "canonical-chunks")
    assert (
        check["badChunks"] == 3
        and check["repairable"] is False
        and "restore the archive from a copy" in check["detail"]
    )
    assert set(check["documents"]) <= {f"{i} v1" for i in ids} and check["documents"]
    generations = "SELECT count(*), max(id) FROM index_generations"  # a rebuild starts new ones
    before = archive.conn.execute(generations).fetchone()
    code, report = _doctor(tmp_path, "--repair")
    assert code == 1 and report["repaired"] == []  # before: windows rebuilt from the damaged bytes
    assert archive.conn.execute(generations).fetchone() == before
    code, report = _doctor(tmp_path)
    assert code == 1 and "canonical-chunks" in _failing(report)  # before: a later run said healthy


def test_a_payload_that_does_not_inflate_is_damage_doctor_reports_and_get_answers_typed(archive, tmp_path):
    """A deflated payload cut short (or one that inflates to another length) is a damaged chunk:
    doctor names its document, and reading it is `archive-corrupt`, never a traceback."""
    ids = _texts(archive, 2)
    cut, longer = [row for (row,) in archive.conn.execute("SELECT id FROM chunks WHERE length(data) < byte_length")]
    archive.conn.execute("UPDATE chunks SET data = substr(data, 1, length(data) / 2) WHERE id = ?", (cut,))
    archive.conn.execute("UPDATE chunks SET byte_length = byte_length + 1 WHERE id = ?", (longer,))
    code, report = _doctor(tmp_path)
    check = next(c for c in report["checks"] if c["name"] == "canonical-chunks")
    assert code == 1 and check["badChunks"] == 2 and sorted(d.split()[0] for d in check["documents"]) == sorted(ids)
    for document_id in ids:
        with pytest.raises(ArchiveCorrupt) as raised:
            archive.get({"documentId": document_id})
        assert raised.value.details["reason"] == "chunk-unreadable"


def test_a_deleted_chunk_row_is_found_by_a_default_run(tmp_path):
    db = tmp_path / "archive" / "archive.db"
    with Archive.open(db) as archive:
        ids = _texts(archive, 8)
    import apsw

    raw = apsw.Connection(str(db))  # as a broken tool would: foreign keys off
    raw.execute("DELETE FROM chunks WHERE id = (SELECT max(id) FROM chunks)")
    raw.close()
    code, report = _doctor(tmp_path)
    assert code == 1 and "canonical-chunks" in _failing(report)
    check = next(c for c in report["checks"] if c["name"] == "canonical-chunks")
    assert len(check["documents"]) == 1 and check["documents"][0].split()[0] in ids


def test_orphan_checkpoint_parts_are_reported_and_expired_past_the_grace_period(tmp_path):
    now = ["2026-11-01T10:00:00.000Z"]
    part = {
        "project": "/work/p",
        "sessionId": "s",
        "kind": "checkpoint-part",
        "messages": [{"key": "checkpoint:abc:0", "role": "user", "text": "half of an input"}],
    }
    with Archive.open(tmp_path / "a.db", clock=lambda: now[0]) as archive:
        first = archive.admit(part)
        report = archive.call("doctor", {})
        assert report["healthy"] is False and "checkpoint-parts" in _failing(report)
        now[0] = "2026-11-03T10:00:00.000Z"
        repaired = archive.call("doctor", {"repair": True})
        assert repaired["healthy"] is True and any("1 orphan" in r for r in repaired["repaired"])
        # the expired orphan gave up its identity (its 32-byte digest, now 'orphan:' and its hex):
        # a retry of the same part writes a fresh one, the next version of the same id
        (released,) = archive.conn.execute("SELECT identity_digest FROM documents").fetchone()
        assert isinstance(released, str) and len(released) == len("orphan:") + 64
        retry = archive.admit(part)
        assert retry["created"] is True and retry["documentId"] == first["documentId"] and retry["version"] == 2


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
    assert (
        "disk" in _failing(report) and "disk-low" in next(c for c in report["checks"] if c["name"] == "disk")["detail"]
    )


def _damaged_copies(tmp_path) -> list:
    """Two damaged archives: a table's b-tree page header flipped, and the file cut short by 3 pages."""
    db = tmp_path / "archive" / "archive.db"
    with Archive.open(db) as archive:
        _texts(archive, 40)
        archive.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        page, root = (
            archive.conn.execute("PRAGMA page_size").fetchone()[0],
            archive.conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'documents'").fetchone()[0],
        )
    data = db.read_bytes()
    flipped = bytearray(data)
    flipped[(root - 1) * page] ^= 0xFF  # the b-tree page type byte
    copies = []
    for name, content in (("flipped", bytes(flipped)), ("cut", data[: len(data) - 3 * page])):
        target = tmp_path / name / "archive.db"
        target.parent.mkdir()
        target.write_bytes(content)
        target.chmod(0o600)
        copies.append(target)
    return copies


def test_a_damaged_or_truncated_file_is_reported_as_corruption_with_restore_advice(tmp_path):
    from cwa.errors import EXIT_CODES

    for damaged in _damaged_copies(tmp_path):
        env = hermetic_env(tmp_path, damaged)
        before = damaged.read_bytes()
        done = run_cwa(["doctor", "--json"], env)
        report = orjson.loads(done.stdout)  # a report, not archive-incompatible
        assert done.returncode == 1 and report["healthy"] is False, (damaged, done.stdout[:300])
        integrity = next(c for c in report["checks"] if c["name"] == "integrity")
        assert not integrity["ok"] and "restore the archive from a copy" in integrity["detail"]
        record = run_cwa(["evidence", "--no-gates"], env)
        assert record.returncode == 1 and orjson.loads(record.stdout)["passed"] is False
        assert orjson.loads(record.stdout)["checks"][0]["results"]["integrity"] is False
        status = run_cwa(["status", "--json"], env)
        error = orjson.loads(status.stdout)["error"]
        assert status.returncode == EXIT_CODES["archive-corrupt"] == 12 and error["code"] == "archive-corrupt"
        assert "restore the archive from a copy" in error["message"] and b"Traceback" not in status.stderr
        assert damaged.read_bytes() == before  # nothing was written into the damaged file


def test_a_file_that_is_no_database_is_still_incompatible(tmp_path):
    target = tmp_path / "notes.db"
    target.write_bytes(b"just some text, not an archive\n" * 200)
    done = run_cwa(["status", "--json"], hermetic_env(tmp_path, target))
    assert orjson.loads(done.stdout)["error"]["code"] == "archive-incompatible"
