"""Worker processes for the reliability suites (tests/test_concurrency.py, tests/test_faults.py,
eval/reliability/soak.py): each opens the archive itself, as separate `cwa` processes do."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3

PROJECT = "/work/faults"
QUIET = {"CWA_SEMANTIC_RETRIEVAL": "false", "CWA_DISK_CRITICAL_MEBIBYTES": "0"}


def _open(db: str):
    """The archive with QUIET settings (never by changing this process's environment: the test
    process calls this too)."""
    from cwa.api import Archive
    from cwa.config import load_settings

    return Archive.open(db, settings=load_settings(None, env={**os.environ, **QUIET}))


def document_text(writer: int, number: int) -> str:
    return (
        f"writer {writer} note {number}: the retry budget for service-{writer}-{number} is "
        f"{number % 7} attempts; see src/service_{writer}.py line {number}"
    )


def stored_digest(messages: list[dict[str, Any]]) -> str:
    """blake3 of the document text the archive stores for `messages` (what `get` returns)."""
    from cwa.store.serialization import serialize_messages

    return blake3.blake3(serialize_messages(messages).text).hexdigest()


def write_for(db: str, writer: int, seconds: float) -> dict[str, Any]:
    """Admit distinct documents for `seconds`; every acknowledged id with its text digest."""
    from cwa.errors import CwaError

    archive = _open(db)
    acknowledged, errors, number = [], [], 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        messages = [{"role": "user", "text": document_text(writer, number)}]
        try:
            done = archive.admit(
                {"project": PROJECT, "sessionId": f"writer-{writer}", "kind": "turn", "messages": messages}
            )
            acknowledged.append((done["documentId"], stored_digest(messages)))
        except CwaError as error:
            errors.append(f"{error.code}: {error.message}")
        number += 1
    archive.close()
    return {"acknowledged": acknowledged, "errors": errors}


def _read_loop(keep_going: Callable[[], bool], step: Callable[[int], None]) -> tuple[int, list[str], float]:
    """Run `step(number)` while `keep_going()`: the steps that succeeded, the typed errors of the
    others, the longest single step (seconds)."""
    from cwa.errors import CwaError

    done, errors, longest, number = 0, [], 0.0, 0
    while keep_going():
        started = time.monotonic()
        try:
            step(number)
            done += 1
        except CwaError as error:
            errors.append(f"step {number}: {error.code}: {error.message}")
        longest = max(longest, time.monotonic() - started)
        number += 1
    return done, errors, longest


def _search_then_recall(archive, query: str) -> None:
    found = archive.call("search", {"project": PROJECT, "query": query, "semanticPolicy": "never"})
    if found["results"]:
        archive.call("recall", {"project": PROJECT, "locator": found["results"][0]["locator"]})


def read_for(db: str, reader: int, seconds: float) -> dict[str, Any]:
    """Search, preflight, recall and gather in turn for `seconds`: operations, errors, the
    longest single operation."""
    archive = _open(db)

    def step(number: int) -> None:
        kind = number % 4
        if kind == 0:
            archive.call(
                "search", {"project": PROJECT, "query": f"retry budget service {number % 5}", "semanticPolicy": "never"}
            )
        elif kind == 1:
            archive.call(
                "preflight",
                {
                    "project": PROJECT,
                    "sessionId": f"reader-{reader}",
                    "messageKey": f"r{reader}-{number}",
                    "text": "what was the retry budget again?",
                },
            )
        elif kind == 2:
            _search_then_recall(archive, f"retry budget service {number % 5}")
        else:
            archive.call("gather", {"project": PROJECT, "query": "retry budget", "maxTokens": 800})

    deadline = time.monotonic() + seconds
    ops, errors, longest = _read_loop(lambda: time.monotonic() < deadline, step)
    archive.close()
    return {"ops": ops, "errors": errors, "longest": longest}


def seed(db: str, documents: int, words: int = 200) -> None:
    """`documents` turns of varied words, for work that must take a while (a rebuild)."""
    import random

    archive = _open(db)
    rng = random.Random(documents)
    vocabulary = [f"term{i}" for i in range(4000)]
    for number in range(documents):
        archive.admit(
            {
                "project": PROJECT,
                "sessionId": f"seed-{number % 10}",
                "kind": "turn",
                "messages": [
                    {
                        "role": "user",
                        "text": f"retry budget {number} " + " ".join(rng.choice(vocabulary) for _ in range(words)),
                    },
                    {"role": "assistant", "text": " ".join(rng.choice(vocabulary) for _ in range(words))},
                ],
            }
        )
    archive.close()


def verify(db: str, acknowledged: list[tuple[str, str]]) -> dict[str, Any]:
    """Integrity check, every acknowledged document present with its exact text digest, and the
    live turns (to compare with what was acknowledged: nothing lost or stored twice)."""
    from cwa.errors import CwaError

    checked = integrity(db)
    archive = _open(db)
    conn = archive.conn
    missing, wrong = [], []
    for document_id, digest in acknowledged:
        try:
            text = archive.get({"documentId": document_id})["text"]
        except CwaError:
            missing.append(document_id)
            continue
        if blake3.blake3(text.encode()).hexdigest() != digest:
            wrong.append(document_id)
    live = conn.execute("SELECT count(*) FROM documents WHERE state = 'live' AND kind = 'turn'").fetchone()[0]
    archive.close()
    return {"integrity": checked, "missing": missing, "wrong": wrong, "liveTurns": live}


def rebuilds_started(db: str) -> int:
    """Index rebuilds begun and not finished (a killed one stays unfinished)."""
    import apsw

    conn = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute(
            "SELECT count(*) FROM index_generations WHERE reason = 'rebuild' AND finished_at IS NULL"
        ).fetchone()[0]
    finally:
        conn.close()


def merges_held(db: str) -> bool:
    """Whether FTS5's merges of deleted rows are held for a rebuild (cwa/store/full_text_merges.py):
    'deletemerge' 0 in the window index and a lease in `meta`."""
    import apsw

    conn = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        option = conn.execute("SELECT v FROM window_fts_config WHERE k = 'deletemerge'").fetchone()
        lease = conn.execute("SELECT count(*) FROM meta WHERE key = 'full_text_merges_held_until'").fetchone()[0]
        return option == (0,) and lease == 1
    finally:
        conn.close()


def integrity(db: str) -> str:
    """PRAGMA integrity_check from a new connection (FTS5 included)."""
    import apsw

    conn = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def path_of(tmp: Path) -> str:
    return str(tmp / "archive.db")


def _acknowledge(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")
        out.flush()
        os.fsync(out.fileno())


def acknowledged_lines(path: Path) -> list[list[str]]:
    """Complete acknowledgement lines (a kill may cut the last one short)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    return [line.split() for line in text.split("\n")[:-1] if line]


def admission_request(writer: int, number: int) -> dict[str, Any]:
    return {
        "project": PROJECT,
        "sessionId": f"writer-{writer}",
        "kind": "turn",
        "messages": [{"role": "user", "text": document_text(writer, number)}],
    }


def child_admit(db: str, ack: str, writer: int, start: int) -> None:
    """Admit documents until killed; acknowledge each (id, number, digest) once admission returned."""
    archive = _open(db)
    number = start
    while True:
        request = admission_request(writer, number)
        done = archive.admit(request)
        _acknowledge(ack, f"{done['documentId']} {number} {stored_digest(request['messages'])}")
        number += 1


def checkpoint_text(cycle: int, megabytes: int = 4) -> str:
    line = f"cycle {cycle} build log line: compiling module ok\n"
    half = line * (megabytes * (1 << 20) // (2 * len(line)))
    return f"{half}FAULT-SENTINEL-{cycle}-MIDDLE\n{half}"


def child_checkpoint(db: str, ack: str, cycle: int, megabytes: int, started: str) -> None:
    """One checkpoint of a few MB; touch `started` as the call begins (after start-up), and
    acknowledge its root id once it returned."""
    archive = _open(db)
    text = checkpoint_text(cycle, megabytes)
    Path(started).touch()
    done = archive.call("checkpoint", {"project": PROJECT, "sessionId": "checkpoints", "text": text})
    _acknowledge(ack, f"{done['rootId']} {cycle}")


REPO = Path(__file__).resolve().parent.parent


def child(code: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", f"import fault_workers as w; {code}"],
        env=env | {"PYTHONPATH": str(REPO / "tests")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def cwa(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "cwa", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def _wait_for(marker: Path, process: subprocess.Popen, seconds: float = 60) -> float:
    """The moment `marker` appeared (the child reached its measured step)."""
    deadline = time.monotonic() + seconds
    while not marker.exists():
        if process.poll() is not None:
            raise RuntimeError(f"worker ended before {marker.name}: {process.stderr.read().decode()[-2000:]}")
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"worker did not reach {marker.name} in {seconds} s")
        time.sleep(0.002)
    return time.monotonic()


def kill_after(process: subprocess.Popen, seconds: float) -> bool:
    """SIGKILL `process` after `seconds` unless it ended first; whether it was killed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait(30)
    return True


def _search_ids(archive, query: str, limit: int = 5) -> list[str]:
    return [
        r["documentId"]
        for r in archive.call(
            "search", {"project": PROJECT, "query": query, "semanticPolicy": "never", "limit": limit}
        )["results"]
    ]


def _holds(archive, sentinel: str) -> bool:
    """Whether a search finds this exact sentinel (not a neighbour sharing some of its words)."""
    found = archive.call("search", {"project": PROJECT, "query": f'"{sentinel}"', "semanticPolicy": "never"})["results"]
    return any(sentinel in r["snippet"] for r in found)


def admission_kills(folder: Path, env: dict[str, str], kills: int, rng) -> dict[str, Any]:
    """SIGKILL admission children at random moments; then check every acknowledged document and
    retry each acknowledged request (it must give the same id and write nothing)."""
    db, ack = path_of(folder), folder / "ack.txt"
    done = 0
    started = time.monotonic()
    for _ in range(kills):
        start = 1000 * done  # fresh numbers after each kill
        process = child(f"w.child_admit({db!r}, {str(ack)!r}, 1, {start})", env)
        done += kill_after(process, rng.uniform(0.6, 1.5))
    seconds = time.monotonic() - started
    lines = acknowledged_lines(ack)
    checked = verify(db, [(document_id, digest) for document_id, _, digest in lines])
    archive = _open(db)
    mismatches = 0
    for document_id, number, _ in lines:
        again = archive.admit(admission_request(1, int(number)))
        mismatches += again["documentId"] != document_id or again["created"] is not False
    archive.close()
    return {
        "kills": done,
        "acknowledged": len(lines),
        "missing": len(checked["missing"]),
        "wrong": len(checked["wrong"]),
        "integrity": checked["integrity"],
        "retryMismatches": mismatches,
        "seconds": round(seconds, 1),
    }


def checkpoint_kills(folder: Path, env: dict[str, str], cycles: int, rng, megabytes: int = 4) -> dict[str, Any]:
    """SIGKILL checkpoint children; then: no part searchable without its root, and the retry of
    each checkpoint completes with the same ids when its root had been acknowledged."""
    db, ack = path_of(folder), folder / "ack.txt"
    kills, duration = 0, 0.0
    for cycle in range(cycles):
        started = folder / f"checkpoint-{cycle}.started"
        process = child(f"w.child_checkpoint({db!r}, {str(ack)!r}, {cycle}, {megabytes}, {str(started)!r})", env)
        begun = _wait_for(started, process)
        if cycle % 4 == 0:
            # one in four finishes: it times the call, and its acknowledged root's retry is checked
            process.wait(120)
            duration = max(duration, time.monotonic() - begun)
        else:
            # the kill lands inside the call, wherever its time goes on this machine
            kills += kill_after(process, rng.uniform(0.05, 0.85) * duration)
    checked = integrity(db)
    archive = _open(db)
    roots = {int(cycle): root for root, cycle in acknowledged_lines(ack)}
    partial_visible = retry_mismatches = incomplete = 0
    for cycle in range(cycles):
        text = checkpoint_text(cycle, megabytes)
        sentinel = f"FAULT-SENTINEL-{cycle}-MIDDLE"
        has_root = (
            archive.conn.execute(
                "SELECT count(*) FROM documents WHERE kind = 'checkpoint-root' AND metadata LIKE ?",
                (f'%"bytes":{len(text.encode())}%',),
            ).fetchone()[0]
            > 0
        )
        partial_visible += _holds(archive, sentinel) and not has_root  # found by search without a root
        done = archive.call("checkpoint", {"project": PROJECT, "sessionId": "checkpoints", "text": text})
        if cycle in roots:
            retry_mismatches += done["rootId"] != roots[cycle] or done["created"] is not False
        unindexed = archive.conn.execute(
            "SELECT count(*) FROM checkpoint_parts c JOIN documents d ON d.id = c.part_row "
            "WHERE c.root_row = (SELECT id FROM documents WHERE document_id = ?) AND d.index_generation IS NULL",
            (done["rootId"],),
        ).fetchone()[0]
        incomplete += archive.get({"documentId": done["rootId"]})["text"] != text or unindexed > 0
    # structurally: a part no root names holds no derived rows, so nothing can find it
    partial_visible += archive.conn.execute(
        "SELECT count(*) FROM documents d WHERE d.kind = 'checkpoint-part' "
        "AND NOT EXISTS (SELECT 1 FROM checkpoint_parts c WHERE c.part_row = d.id) "
        "AND (EXISTS (SELECT 1 FROM windows w WHERE w.document_row = d.id) "
        "OR EXISTS (SELECT 1 FROM anchors a WHERE a.document_row = d.id))"
    ).fetchone()[0]
    archive.close()
    return {
        "kills": kills,
        "cycles": cycles,
        "acknowledged": len(roots),
        "integrity": checked,
        "partialVisible": partial_visible,
        "retryMismatches": retry_mismatches,
        "incomplete": incomplete,
    }


def redacted_session(db: str, tag: int, documents: int = 60) -> None:
    """A session of large tool outputs, redacted: work for maintenance (purge, space)."""
    archive = _open(db)
    for number in range(documents):
        archive.admit(
            {
                "project": PROJECT,
                "sessionId": f"doomed-{tag}",
                "kind": "tool-result",
                "messages": [{"role": "toolResult", "text": f"output {tag}-{number} " + "x" * 40_000}],
            }
        )
    asked = archive.call("redact", {"project": PROJECT, "sessionId": f"doomed-{tag}"})
    archive.call("redact", {"project": PROJECT, "sessionId": f"doomed-{tag}", "confirm": asked["confirm"]})
    archive.close()


def maintenance_kills(folder: Path, env: dict[str, str], cycles: int, rng) -> dict[str, Any]:
    """SIGKILL `maintain` (every other one with --vacuum) amid purges; every document written
    before stays whole; a final pass finishes the purge."""
    db = path_of(folder)
    written = write_for(db, 2, 1.5)["acknowledged"]
    kills, damaged = 0, []
    for cycle in range(cycles):
        redacted_session(db, cycle)
        process = cwa(["maintain", "--vacuum"] if cycle % 2 else ["maintain"], env)
        killed = kill_after(process, rng.uniform(0.05, 0.4))
        kills += killed
        if not killed and process.returncode != 0:
            damaged.append(f"maintain exited {process.returncode}")
        checked = verify(db, written)
        if checked["integrity"] != "ok" or checked["missing"] or checked["wrong"]:
            damaged.append(f"cycle {cycle}: {checked['integrity']}, {len(checked['missing'])} missing")
    for _ in range(100):  # passes until nothing is left (each is bounded)
        finished = subprocess.run([sys.executable, "-m", "cwa", "maintain", "--json"], env=env, capture_output=True)
        if finished.returncode != 0 or not json.loads(finished.stdout)["more"]:
            break
    archive = _open(db)
    queued = archive.conn.execute("SELECT count(*) FROM purge_queue").fetchone()[0]
    leftover = len(_search_ids(archive, "output"))
    archive.close()
    return {
        "kills": kills,
        "cycles": cycles,
        "documents": len(written),
        "damaged": damaged,
        "finalExit": finished.returncode,
        "purgeQueued": queued,
        "redactedFound": leftover,
    }


def rebuild_kills(folder: Path, env: dict[str, str], kills: int, rng, documents: int = 300) -> dict[str, Any]:
    """SIGKILL `index rebuild` inside its work; search keeps finding documents between kills and
    a complete rerun gives the results of before. Each kill lands at a random fraction of the
    time one whole rebuild took on this machine, so a faster machine still kills inside it; a
    rebuild that ran faster than that and ended first is run again (at most `kills` times more)."""
    db = path_of(folder)
    seed(db, documents)
    archive = _open(db)
    queries = [f"retry budget {n}" for n in (3, 40, 77, 120)]
    before = [_search_ids(archive, q) for q in queries]
    whole = min(_rebuild_work_seconds(db, env) for _ in range(2))
    done, broken, blind, attempts = 0, 0, 0, 0
    while done < kills and attempts < 2 * kills:
        attempts += 1
        process = _rebuild_begun(db, env)
        done += kill_after(process, rng.uniform(0.05, 0.7) * whole)
        broken += integrity(db) != "ok"  # from a new connection (docs/reliability.md)
        blind += not all(_search_ids(archive, q) for q in queries)
    held = merges_held(db)  # the last attempt was killed
    rerun = subprocess.run([sys.executable, "-m", "cwa", "index", "rebuild"], env=env, capture_output=True)
    same = [_search_ids(archive, q) for q in queries] == before
    archive.close()
    return {
        "kills": done,
        "integrityFailures": broken,
        "searchesFindingNothing": blind,
        "rerunExit": rerun.returncode,
        "sameResultsAfterRerun": same,
        "mergesHeldAfterKills": held,
        "mergesHeldAfterRerun": merges_held(db),
    }


def _rebuild_begun(db: str, env: dict[str, str]) -> subprocess.Popen:
    """Start `cwa index rebuild` and return once it has begun its work (or ended)."""
    begun = rebuilds_started(db)
    process = cwa(["index", "rebuild"], env)
    deadline = time.monotonic() + 60
    while rebuilds_started(db) == begun and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    return process


def _rebuild_work_seconds(db: str, env: dict[str, str]) -> float:
    """Seconds one whole rebuild takes from the start of its work to its exit."""
    process = _rebuild_begun(db, env)
    began = time.monotonic()
    process.wait(120)
    return time.monotonic() - began


def reads_during(
    db: str, env: dict[str, str], args: list[str], started: Callable[[], bool] | None = None
) -> dict[str, Any]:
    """Run `cwa ARGS` and, while it runs, search, recall and preflight in turn from this process:
    how many read rounds, errors, and the longest round."""
    archive = _open(db)
    process = cwa(args, env)
    deadline = time.monotonic() + 120
    while started is not None and not started() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    began = time.monotonic()

    def step(number: int) -> None:
        _search_then_recall(archive, f"retry budget {number % 300}")
        archive.call(
            "preflight",
            {
                "project": PROJECT,
                "sessionId": "soak-reader",
                "messageKey": f"m{number}-{began}",
                "text": f"what was the retry budget {number % 300}?",
            },
        )

    reads, errors, longest = _read_loop(lambda: process.poll() is None, step)
    archive.close()
    return {
        "command": " ".join(args),
        "seconds": round(time.monotonic() - began, 2),
        "exit": process.returncode,
        "readRounds": reads,
        "errors": errors,
        "longestReadRoundMs": round(longest * 1000, 1),
    }
