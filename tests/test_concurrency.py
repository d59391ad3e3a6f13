"""Writers and readers on one archive at once, and reads during long maintenance work."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import time

import fault_workers as workers
from conftest import hermetic_env


def test_four_writers_and_four_readers_lose_nothing_and_surface_no_error(tmp_path):
    db = workers.path_of(tmp_path)
    workers.seed(db, 20)
    spawn = multiprocessing.get_context("spawn")
    with spawn.Pool(8) as pool:
        writes = [pool.apply_async(workers.write_for, (db, n, 6.0)) for n in range(4)]
        reads = [pool.apply_async(workers.read_for, (db, n, 6.0)) for n in range(4)]
        written = [w.get(timeout=120) for w in writes]
        read = [r.get(timeout=120) for r in reads]
    acknowledged = [a for w in written for a in w["acknowledged"]]
    assert [e for w in written for e in w["errors"]] == []
    assert [e for r in read for e in r["errors"]] == []
    assert len(acknowledged) >= 40 and all(r["ops"] >= 10 for r in read)
    checked = workers.verify(db, acknowledged)
    assert checked["integrity"] == "ok" and checked["missing"] == [] and checked["wrong"] == []
    assert checked["liveTurns"] == 20 + len(acknowledged)  # nothing lost, nothing twice
    assert len({document_id for document_id, _ in acknowledged}) == len(acknowledged)


def test_reads_and_their_own_small_writes_complete_while_a_rebuild_runs(tmp_path):
    db = workers.path_of(tmp_path)
    workers.seed(db, 400)
    env = hermetic_env(tmp_path, tmp_path / "archive.db") | workers.QUIET
    rebuild = subprocess.Popen([sys.executable, "-m", "cwa", "index", "rebuild"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not workers.rebuilds_started(db):
            assert rebuild.poll() is None and time.monotonic() < deadline, "the rebuild never started"
            time.sleep(0.02)
        archive = workers._open(db)
        found = archive.call("search", {"project": workers.PROJECT, "query": "retry budget 17",
                                        "semanticPolicy": "never"})
        recalled = archive.call("recall", {"project": workers.PROJECT, "locator": found["results"][0]["locator"]})
        decided = archive.call("preflight", {"project": workers.PROJECT, "sessionId": "live",
                                             "messageKey": "k-during-rebuild", "text": "what about retry budget 17?"})
        again = archive.call("preflight", {"project": workers.PROJECT, "sessionId": "live",
                                           "messageKey": "k-during-rebuild", "text": "what about retry budget 17?"})
        archive.close()
        # every read answered while the rebuild was still going: none waited for all of it
        assert rebuild.poll() is None and workers.rebuilds_started(db)
        assert found["results"] and recalled["status"] == "resolved"
        assert again["diagnostics"]["frozen"] is True  # the decision was recorded once, during the rebuild
        assert again.get("modelVisibleText") == decided.get("modelVisibleText")
    finally:
        assert rebuild.wait(timeout=300) == 0, rebuild.stderr.read().decode()
