"""Several OS processes write one archive file at once without errors or lost documents."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import apsw

from conftest import DISK_GUARD_OFF
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
    per_session = dict(
        conn.execute("SELECT session_id, count(*) FROM live_documents GROUP BY session_id")
    )
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
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db_path), "w", "200"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    later = shift(utc_now(), 30 * 86_400)  # past the 14 days of tool results, not the 90 of turns
    maintainer = subprocess.Popen([sys.executable, "-c", MAINTAINER, str(db_path), "40", later],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
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
