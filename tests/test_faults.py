"""SIGKILL at random points of admission, checkpoint, maintenance (with vacuum) and index rebuild:
after each kill the archive passes its integrity check, every acknowledged document is there
with its exact bytes, no partial checkpoint is usable, and a retry gives the same ids.
30 kills in all (eval/reliability/soak.py runs the same cycles for longer)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

import pytest

import fault_workers as workers
from conftest import REPO, hermetic_env

ADMISSION_KILLS, CHECKPOINT_KILLS, MAINTENANCE_KILLS, REBUILD_KILLS = 10, 8, 6, 6


def _child(code: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", f"import fault_workers as w; {code}"],
                            env=env | {"PYTHONPATH": str(REPO / "tests")}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def _cwa(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cwa", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def _kill_after(process: subprocess.Popen, seconds: float) -> bool:
    """SIGKILL `process` after `seconds` unless it ended first; whether it was killed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait(30)
    return True


@pytest.fixture
def env(tmp_path):
    return hermetic_env(tmp_path, tmp_path / "archive.db") | workers.QUIET


def test_sigkill_during_admission_loses_nothing_acknowledged_and_retries_give_the_same_ids(tmp_path, env):
    db, ack = workers.path_of(tmp_path), tmp_path / "ack.txt"
    rng = random.Random(11)
    kills = 0
    for _ in range(ADMISSION_KILLS):
        start = len(workers.acknowledged_lines(ack)) + 1000 * kills  # fresh numbers after each kill
        child = _child(f"w.child_admit({db!r}, {str(ack)!r}, 1, {start})", env)
        kills += _kill_after(child, rng.uniform(0.6, 1.5))
    assert kills == ADMISSION_KILLS
    lines = workers.acknowledged_lines(ack)
    assert len(lines) >= 20, "the children got to admit before their kills"
    checked = workers.verify(db, [(document_id, digest) for document_id, _, digest in lines])
    assert checked["integrity"] == "ok" and checked["missing"] == [] and checked["wrong"] == []
    archive = workers._open(db)
    for document_id, number, _ in lines:  # a retry of an acknowledged request: same id, nothing new
        again = archive.admit(workers.admission_request(1, int(number)))
        assert again["documentId"] == document_id and again["created"] is False
    archive.close()


def test_sigkill_during_a_checkpoint_never_leaves_a_usable_partial_and_the_retry_completes(tmp_path, env):
    db, ack = workers.path_of(tmp_path), tmp_path / "ack.txt"
    rng = random.Random(12)
    killed = []
    for cycle in range(CHECKPOINT_KILLS):
        child = _child(f"w.child_checkpoint({db!r}, {str(ack)!r}, {cycle})", env)
        if _kill_after(child, rng.uniform(0.5, 2.5)):
            killed.append(cycle)
        else:
            assert child.returncode == 0, child.stderr.read().decode()
    assert len(killed) >= CHECKPOINT_KILLS // 2
    assert workers.integrity(db) == "ok"
    archive = workers._open(db)
    roots = {int(cycle): root for root, cycle in workers.acknowledged_lines(ack)}
    for cycle in range(CHECKPOINT_KILLS):
        found = archive.call("search", {"project": workers.PROJECT, "query": f"FAULT-SENTINEL-{cycle}-MIDDLE",
                                        "semanticPolicy": "never"})["results"]
        has_root = archive.conn.execute(
            "SELECT count(*) FROM documents WHERE kind = 'checkpoint-root' AND metadata LIKE ?",
            (f'%"bytes":{len(workers.checkpoint_text(cycle).encode())}%',)).fetchone()[0] > 0
        assert not found or has_root, f"cycle {cycle}: a part is searchable without its root"
        done = archive.call("checkpoint", {"project": workers.PROJECT, "sessionId": "checkpoints",
                                           "text": workers.checkpoint_text(cycle)})
        if cycle in roots:
            assert done["rootId"] == roots[cycle] and done["created"] is False  # the same ids on retry
        assert archive.get({"documentId": done["rootId"]})["text"] == workers.checkpoint_text(cycle)
        assert archive.call("search", {"project": workers.PROJECT, "query": f"FAULT-SENTINEL-{cycle}-MIDDLE",
                                       "semanticPolicy": "never"})["results"]
    archive.close()


def _redacted_session(db: str, tag: int, documents: int = 60) -> None:
    archive = workers._open(db)
    for number in range(documents):
        archive.admit({"project": workers.PROJECT, "sessionId": f"doomed-{tag}", "kind": "tool-result",
                       "messages": [{"role": "toolResult", "text": f"output {tag}-{number} " + "x" * 40_000}]})
    asked = archive.call("redact", {"project": workers.PROJECT, "sessionId": f"doomed-{tag}"})
    archive.call("redact", {"project": workers.PROJECT, "sessionId": f"doomed-{tag}", "confirm": asked["confirm"]})
    archive.close()


def test_sigkill_during_maintenance_and_vacuum_keeps_the_archive_whole(tmp_path, env):
    db = workers.path_of(tmp_path)
    written = workers.write_for(db, 2, 1.5)["acknowledged"]
    rng = random.Random(13)
    for cycle in range(MAINTENANCE_KILLS):
        _redacted_session(db, cycle)
        args = ["maintain", "--vacuum"] if cycle % 2 else ["maintain"]
        child = _cwa(args, env)
        assert _kill_after(child, rng.uniform(0.05, 0.4)) or child.returncode == 0
        checked = workers.verify(db, written)
        assert checked["integrity"] == "ok" and checked["missing"] == [] and checked["wrong"] == []
    finished = subprocess.run([sys.executable, "-m", "cwa", "maintain", "--json"], env=env, capture_output=True)
    assert finished.returncode == 0, finished.stderr.decode()
    archive = workers._open(db)
    assert archive.conn.execute("SELECT count(*) FROM purge_queue").fetchone()[0] == 0
    assert archive.call("search", {"project": workers.PROJECT, "query": "output", "semanticPolicy": "never"})["results"] == []
    archive.close()


def test_sigkill_during_index_rebuild_leaves_search_working_and_a_rerun_gives_the_same_results(tmp_path, env):
    db = workers.path_of(tmp_path)
    workers.seed(db, 300)
    archive = workers._open(db)
    queries = [f"retry budget {n}" for n in (3, 40, 77, 120)]

    def results() -> list[list[str]]:
        return [[r["documentId"] for r in archive.call("search", {"project": workers.PROJECT, "query": q,
                                                                   "semanticPolicy": "never", "limit": 5})["results"]]
                for q in queries]

    before = results()
    rng = random.Random(14)
    for _ in range(REBUILD_KILLS):
        begun = workers.rebuilds_started(db)
        child = _cwa(["index", "rebuild"], env)
        deadline = time.monotonic() + 60
        while workers.rebuilds_started(db) == begun:  # killed inside the rebuild, not in Python's start-up
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        assert _kill_after(child, rng.uniform(0.05, 0.6))
        # from a new connection: one that has not read since another process rewrote the FTS5
        # index may report stale-cache "corruption" (docs/reliability.md)
        assert workers.integrity(db) == "ok"
        assert all(results())  # every query still finds its documents mid-rebuild
    rerun = subprocess.run([sys.executable, "-m", "cwa", "index", "rebuild"], env=env, capture_output=True)
    assert rerun.returncode == 0, rerun.stderr.decode()
    assert results() == before
    archive.close()
