"""`Archive.admit_many` (and `cwa admit` with JSON lines): many documents archived first in
batches, then indexed with a helper process preparing, as `cwa import` archives a history."""

from __future__ import annotations

import orjson
import pytest
from conftest import derived_rows, hermetic_env, hermetic_settings, run_cwa

from cwa.api import Archive
from cwa.errors import EXIT_CODES, InvalidRequest
from cwa.index import queue_worker


def _turn(n: int) -> dict:
    output = "\n".join(f"src/vault_{n % 5}/lease_{k}.py:{k + 2}: E302 VaultLeaseError in LeasePolicy" for k in range(6))
    return {
        "project": "/p",
        "sessionId": f"s{n // 20}",
        "kind": "turn",
        "createdAt": f"2026-11-{1 + n // 40:02d}T10:{n % 60:02d}:00Z",
        "messages": [
            {"role": "user", "text": f"check vault lease {n}"},
            {"role": "toolResult", "toolName": "bash", "text": output},
            {"role": "assistant", "text": f"Lease {n} checked: renewal window marmalade{n} holds."},
        ],
    }


def _found(archive: Archive, query: str) -> list[str]:
    hits = archive.search({"project": "/p", "query": query, "limit": 3, "leaseSeconds": 0})["results"]
    return [h["documentId"] for h in hits]


def test_admit_many_archives_first_then_indexes_as_one_admit_a_document_would(tmp_path):
    # Enough documents for the helper: every one archived and indexed, nothing left queued, and
    # the derived rows (window ids, BM25F rows, anchors and their dictionary, cues, deflated
    # chunks) those of one `admit` call a document.
    turns = [_turn(n) for n in range(queue_worker.HELPER_MIN_DOCUMENTS + 16)]
    many, alone = tmp_path / "many.db", tmp_path / "alone.db"
    settings = hermetic_settings(tmp_path)
    with Archive.open(many, settings=settings) as archive:
        results = archive.admit_many(turns)
        assert [r["created"] for r in results] == [True] * len(turns)
        assert all(r["indexPending"] and r["generation"] is None for r in results)
        assert archive.status({})["indexQueue"]["documents"] == 0
        assert _found(archive, "marmalade70")[:1] == [results[70]["documentId"]]
        assert archive.get({"documentId": results[70]["documentId"]})["generation"] is not None
    with Archive.open(alone, settings=settings) as archive:
        singles = [archive.admit(t) for t in turns]
    assert [r["documentId"] for r in singles] == [r["documentId"] for r in results]
    assert derived_rows(many) == derived_rows(alone)

    with Archive.open(many, settings=settings) as archive:  # idempotent: a re-run stores nothing
        again = archive.admit_many(turns)
        assert [r["created"] for r in again] == [False] * len(turns)
    assert derived_rows(many) == derived_rows(alone)


def test_a_helper_prepares_what_each_committed_batch_queued_while_the_next_is_archived(tmp_path, monkeypatch):
    # One document a batch: after each commit the indexer hands the helper what was queued (it
    # starts once HELPER_MIN_DOCUMENTS wait) and writes what it has prepared; the end indexes the
    # rest. The derived rows are those of one `admit` call a document, whatever the mix.
    from cwa.store import connection

    monkeypatch.setattr(connection, "BULK_SECONDS", 0.0)
    started: list[bool] = []
    finish = queue_worker.QueueIndexer.finish

    def finish_seen(self, progress=None):
        started.append(self.preparer.helper is not None and len(self.preparer.waiting) > 0)
        return finish(self, progress)

    monkeypatch.setattr(queue_worker.QueueIndexer, "finish", finish_seen)
    turns = [_turn(n) for n in range(3 * queue_worker.HELPER_MIN_DOCUMENTS)]
    many, alone = tmp_path / "many.db", tmp_path / "alone.db"
    settings = hermetic_settings(tmp_path)
    with Archive.open(many, settings=settings) as archive:
        results = archive.admit_many(turns)
        assert archive.status({})["indexQueue"]["documents"] == 0
        assert _found(archive, "marmalade150")[:1] == [results[150]["documentId"]]
    assert started == [True]  # the helper had work in hand before the archiving ended
    with Archive.open(alone, settings=settings) as archive:
        for turn in turns:
            archive.admit(turn)
    assert derived_rows(many) == derived_rows(alone)


def test_admit_many_stops_at_the_first_failing_request_with_the_earlier_ones_archived_and_indexed(tmp_path):
    turns = [_turn(n) for n in range(8)]
    turns[5] = {"project": "/p", "kind": "turn"}  # no session, no messages
    with Archive.open(tmp_path / "a.db", settings=hermetic_settings(tmp_path)) as archive:
        with pytest.raises(InvalidRequest) as failed:
            archive.admit_many(turns)
        assert failed.value.details["request"] == 5
        assert archive.status({})["documents"]["total"] == 5 and archive.status({})["indexQueue"]["documents"] == 0
        assert _found(archive, "marmalade4") and not _found(archive, "marmalade6")


def test_documents_admit_many_left_unindexed_are_read_exactly_and_indexed_later(tmp_path):
    # As if the process stopped between archiving and indexing: each document is read back
    # exactly and counted as queued; the project's next search indexes it first and finds it.
    turns = [_turn(n) for n in range(6)]
    with Archive.open(tmp_path / "a.db", settings=hermetic_settings(tmp_path)) as archive:
        results = archive.admit_many(turns, index=False)
        assert archive.status({})["indexQueue"]["documents"] == 6
        # stored deflated already (no request waits on a bulk admission): the queue rewrites none
        whole = archive.conn.execute("SELECT count(*) FROM chunks WHERE length(data) = byte_length").fetchone()[0]
        assert whole == 0
        text = archive.get({"documentId": results[3]["documentId"]})["text"]
        assert "marmalade3 holds" in text and "VaultLeaseError" in text
        assert _found(archive, "marmalade3")[:1] == [results[3]["documentId"]]
        assert archive.status({})["indexQueue"]["documents"] == 0


KILLED = """
import os, sys, time
sys.path.insert(0, sys.argv[2])
from test_bulk_admission import _turn
from cwa.api import Archive

def requests():
    for n in range(200):
        if n == 100:
            time.sleep(0.6)  # the batch of the first 100 commits with the next admission
        if n == 150:
            os._exit(9)  # killed mid-batch: the 49 admitted since that commit were never acknowledged
        yield _turn(n)

with Archive.open(sys.argv[1]) as archive:
    archive.admit_many(requests())
"""


def test_a_killed_admit_many_loses_nothing_it_committed_and_it_is_indexed_later(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    db = tmp_path / "a.db"
    tests = str(Path(__file__).parent)
    env = hermetic_env(tmp_path, db)
    killed = subprocess.run([sys.executable, "-c", KILLED, str(db), tests], env=env, capture_output=True)
    assert killed.returncode == 9, killed.stderr.decode()
    with Archive.open(db, settings=hermetic_settings(tmp_path)) as archive:
        assert archive.status({})["documents"]["total"] == 101  # the first batch, and the admission that committed it
        assert archive.get({"documentId": _id(archive, 42)})["text"].count("marmalade42") == 1
        assert _found(archive, "marmalade99")  # the project's search indexes what still waits first
        assert archive.status({})["indexQueue"]["documents"] == 0
        assert not _found(archive, "marmalade120")


def _id(archive: Archive, n: int) -> str:
    found = archive.admit(_turn(n))  # idempotent: the id of what is there, and it must be there
    assert found["created"] is False
    return found["documentId"]


def test_cwa_admit_json_lines_are_archived_then_indexed_and_a_bad_line_keeps_the_earlier_ones(tmp_path):
    env = hermetic_env(tmp_path, tmp_path / "a.db")
    source = tmp_path / "batch.jsonl"
    lines = [orjson.dumps(_turn(n)) for n in range(4)]
    source.write_bytes(b"\n".join([*lines[:3], b'{"project": "/p", "kind": "turn"}', lines[3]]) + b"\n")
    failed = run_cwa(["admit", "--file", str(source)], env)
    assert (
        failed.returncode == EXIT_CODES["invalid-request"]
        and b"line 4" in failed.stderr
        and b"Traceback" not in failed.stderr
    )
    status = orjson.loads(run_cwa(["status", "--json"], env).stdout)
    assert status["documents"]["total"] == 3 and status["indexQueue"]["documents"] == 0
    hits = orjson.loads(run_cwa(["search", "marmalade2", "--project", "/p", "--json"], env).stdout)["results"]
    assert hits and "marmalade2" in hits[0]["snippet"]
