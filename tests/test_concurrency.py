"""Several OS processes write one archive file at once without errors or lost documents; writers
and readers together; reads during long maintenance work."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
import time

import apsw
import fault_workers as workers
from conftest import DISK_GUARD_OFF, hermetic_env

from cwa.api import Archive
from cwa.timestamps import shift, utc_now

WRITER = textwrap.dedent(
    """
    import sys
    from cwa.api import Archive

    db, worker, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Archive.open(db) as archive:
        for n in range(count):
            archive.admit({
                "project": "/work/shared-project",
                "sessionId": f"session-{worker}",
                "kind": "tool-result" if n % 3 == 0 else "turn",
                "messages": [
                    {"role": "user", "text": f"worker {worker} question {n} ünï 漢字"},
                    {"role": "assistant", "text": f"answer {n} " + "detail " * (n % 50)},
                ],
            })
    print("done", worker)
    """
)


def test_two_processes_admit_200_documents_each_into_one_file(db_path):
    db_path.parent.mkdir(parents=True)
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db_path), name, "200"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name in ("a", "b")
    ]
    outputs = [w.communicate(timeout=300) for w in workers]
    for worker, (out, err) in zip(workers, outputs):
        assert worker.returncode == 0, err.decode()
        assert err == b""
        assert out.startswith(b"done")

    conn = apsw.Connection(str(db_path))
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM documents").fetchone()[0] == 400
    per_session = dict(conn.execute("SELECT session_id, count(*) FROM live_documents GROUP BY session_id"))
    assert per_session == {"session-a": 200, "session-b": 200}
    assert conn.execute("SELECT count(*) FROM projects").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 800


MAINTAINER = textwrap.dedent(
    """
    import sys
    from cwa.api import Archive

    db, passes, later = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    expired = 0
    with Archive.open(db, clock=lambda: later) as archive:
        for _ in range(passes):
            expired += archive.call("maintain", {"limit": 20})["expired"]
    print("done", expired)
    """
)


def test_maintenance_runs_while_another_process_admits(db_path):
    """Expiry and purge passes interleave with admissions: no errors, no lost or half-purged rows."""
    db_path.parent.mkdir(parents=True)
    env = {**os.environ, **DISK_GUARD_OFF}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db_path), "w", "200"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    later = shift(utc_now(), 30 * 86_400)  # past the 14 days of tool results, not the 90 of turns
    maintainer = subprocess.Popen(
        [sys.executable, "-c", MAINTAINER, str(db_path), "40", later],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    for process in (writer, maintainer):
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err.decode()
        assert out.startswith(b"done")
    with Archive.open(db_path, clock=lambda: later) as archive:
        while archive.call("maintain", {"limit": 500})["more"]:
            pass
        conn = archive.conn
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM documents").fetchone()[0] == 200
        # every tool result (ephemeral) is expired 30 days on; turns (conversation) not yet
        states = dict(conn.execute("SELECT kind, group_concat(DISTINCT state) FROM documents GROUP BY kind"))
        assert states == {"tool-result": "expired", "turn": "live"}
        orphans = conn.execute(
            "SELECT count(*) FROM windows AS w JOIN documents AS d ON d.id = w.document_row WHERE d.state = 'expired'"
        ).fetchone()[0]
        assert orphans == 0 and conn.execute("SELECT count(*) FROM purge_queue").fetchone()[0] == 0


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
    rebuild = subprocess.Popen(
        [sys.executable, "-m", "cwa", "index", "rebuild"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while not workers.rebuilds_started(db):
            assert rebuild.poll() is None and time.monotonic() < deadline, "the rebuild never started"
            time.sleep(0.02)
        archive = workers._open(db)
        found = archive.call(
            "search", {"project": workers.PROJECT, "query": "retry budget 17", "semanticPolicy": "never"}
        )
        recalled = archive.call("recall", {"project": workers.PROJECT, "locator": found["results"][0]["locator"]})
        decided = archive.call(
            "preflight",
            {
                "project": workers.PROJECT,
                "sessionId": "live",
                "messageKey": "k-during-rebuild",
                "text": "what about retry budget 17?",
            },
        )
        again = archive.call(
            "preflight",
            {
                "project": workers.PROJECT,
                "sessionId": "live",
                "messageKey": "k-during-rebuild",
                "text": "what about retry budget 17?",
            },
        )
        archive.close()
        # every read answered while the rebuild was still going: none waited for all of it
        assert rebuild.poll() is None and workers.rebuilds_started(db)
        assert found["results"] and recalled["status"] == "resolved"
        assert again["diagnostics"]["frozen"] is True  # the decision was recorded once, during the rebuild
        assert again.get("modelVisibleText") == decided.get("modelVisibleText")
    finally:
        assert rebuild.wait(timeout=300) == 0, rebuild.stderr.read().decode()
