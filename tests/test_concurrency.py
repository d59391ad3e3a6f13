"""Several OS processes write one archive file at once without errors or lost documents."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import apsw

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
