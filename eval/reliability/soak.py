"""The reliability soak: the fault cycles of tests/test_faults.py at length, writers and readers
together, and how long reads wait while long maintenance runs.

    python eval/reliability/soak.py [--kills 200] [--seconds 20] [--json]

Phases: SIGKILL during admission, checkpoint, maintenance (with vacuum) and index rebuild (the
`--kills` split 2:1:1:1, each followed by the checks of the suite: integrity, digests of every
acknowledged document, no partial checkpoint usable, the same ids on retry); 4 writers and 4
readers for `--seconds` (throughput, errors, lost or duplicated documents); then, on an archive of
`--documents` turns, the longest round of reads (search, recall by locator, preflight) while an
`index rebuild`, a `maintain` that purges and vacuums incrementally, and a `maintain --vacuum`
(a full VACUUM, the one exclusive step) run in another process. Last, `shown`: sessions whose
messages are a year old, driven through the session engine (rotations, externalized output) with
a maintenance pass after every call, over `--days` simulated days and then quiet ones: whatever a
provider copy names must stay readable, what left a copy must keep its 14 days from then, and the
quiet sessions' documents go only 7 + 14 days after their last call; and the same sessions through
a real `cwa serve` running its own passes every 0.1 s while `cwa maintain` runs beside it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import fault_workers as workers
from conftest import hermetic_env, hermetic_settings


def _folder(root: Path, name: str) -> tuple[Path, dict[str, str]]:
    folder = root / name
    folder.mkdir()
    return folder, hermetic_env(folder, folder / "archive.db") | workers.QUIET


def concurrent(root: Path, seconds: float) -> dict:
    folder, _ = _folder(root, "concurrent")
    db = workers.path_of(folder)
    workers.seed(db, 20)
    with multiprocessing.get_context("spawn").Pool(8) as pool:
        writes = [pool.apply_async(workers.write_for, (db, n, seconds)) for n in range(4)]
        reads = [pool.apply_async(workers.read_for, (db, n, seconds)) for n in range(4)]
        written = [w.get(timeout=seconds + 300) for w in writes]
        read = [r.get(timeout=seconds + 300) for r in reads]
    acknowledged = [a for w in written for a in w["acknowledged"]]
    checked = workers.verify(db, acknowledged)
    return {
        "seconds": seconds,
        "admitted": len(acknowledged),
        "admissionsPerSecond": round(len(acknowledged) / seconds, 1),
        "readOps": sum(r["ops"] for r in read),
        "readsPerSecond": round(sum(r["ops"] for r in read) / seconds, 1),
        "longestReadMs": round(max(r["longest"] for r in read) * 1000, 1),
        "errors": sum(len(w["errors"]) for w in written) + sum(len(r["errors"]) for r in read),
        "lost": len(checked["missing"]) + len(checked["wrong"]),
        "duplicated": checked["liveTurns"] - 20 - len(acknowledged),
        "integrity": checked["integrity"],
    }


def waits(root: Path, documents: int) -> list[dict]:
    folder, env = _folder(root, "waits")
    db = workers.path_of(folder)
    workers.seed(db, documents)
    found = []
    begun = workers.rebuilds_started(db)
    found.append(workers.reads_during(db, env, ["index", "rebuild"], lambda: workers.rebuilds_started(db) > begun))
    for tag in range(3):
        workers.redacted_session(db, tag, documents=100)
    found.append(workers.reads_during(db, env, ["maintain", "--limit", "100000"]))
    for tag in range(3, 6):
        workers.redacted_session(db, tag, documents=100)
    found.append(workers.reads_during(db, env, ["maintain", "--limit", "100000", "--vacuum"]))
    return found


YEAR_AGO = 1_763_000_000_000  # epoch ms of 2025-11-13: sessions resumed a year after they were written


def _named(copy: list[dict]) -> set[str]:
    """Archive ids a provider copy names (a pattern of its own, not cwa's `document_ids_in`, so the
    phase also runs against an older tree: PYTHONPATH=<its checkout>)."""
    import re

    return set(re.findall(r"doc-[0-9a-f]{20}", json.dumps(copy)))


def shown(root: Path, days: int, sessions: int = 4) -> dict:
    """What a live window names survives every pass; what leaves keeps its days from then."""
    from session_helpers import Host, Transcript
    from test_lifecycle import Clock, maintain_all

    from cwa.api import Archive

    folder, _ = _folder(root, "shown")
    clock = Clock("2026-12-01T00:00:00.000Z")  # days pass in steps, not in seconds
    settings = hermetic_settings(folder, CWA_SEMANTIC_RETRIEVAL="false", CWA_ROTATION_TURNS="4", CWA_RETAIN_TURNS="2")
    checks = {"passes": 0, "calls": 0, "namedChecks": 0, "lostWhileShown": 0, "expiredEarly": 0}
    left: dict[str, float] = {}  # document → the day it left every copy
    last_named: dict[int, set[str]] = {}
    with Archive.open(folder / "archive.db", settings=settings, clock=clock) as archive:
        hosts = [Host(archive, session=f"old-{n}") for n in range(sessions)]
        transcripts = [Transcript(start=YEAR_AGO) for _ in range(sessions)]
        rng = random.Random(7)
        for step in range(days * 4):  # a call per session every 6 hours
            day = step / 4
            clock.at(day)
            for number, (host, transcript) in enumerate(zip(hosts, transcripts)):
                transcript.user(f"day {day:.2f}: check build {rng.randrange(10**6)}")
                if rng.random() < 0.6:  # above maxToolResultTokens: archived and previewed
                    transcript.tool(
                        "\n".join(
                            f"log {number}.{step}.{k}: value {rng.randrange(10**9)}"
                            for k in range(rng.randrange(700, 1600))
                        )
                    )
                transcript.assistant("Looked at it.")
                named = _named(host.context(transcript))
                checks["calls"] += 1
                for document_id in named:
                    checks["namedChecks"] += 1
                    found = archive.get({"documentId": document_id})
                    checks["lostWhileShown"] += found["state"] not in ("live", "superseded")
                    left.pop(document_id, None)
                for document_id in last_named.get(number, set()) - named:
                    left.setdefault(document_id, day)
                last_named[number] = named
            checks["passes"] += len(maintain_all(archive))
            for document_id, since in left.items():  # what left a copy keeps 14 days from then
                if archive.get({"documentId": document_id})["state"] == "expired" and day < since + 14:
                    checks["expiredEarly"] += 1
        still_named = set().union(*last_named.values())
        engine = archive.conn.execute(
            "SELECT count(*) FROM documents WHERE kind IN ('turn', 'tool-result', 'checkpoint-root', 'checkpoint-part')"
        ).fetchone()[0]
        # the sessions go quiet: 7 days of protection after their last call, then the class's 14
        last_call = (days * 4 - 1) / 4
        clock.at(last_call + 7 + 14 - 0.01)
        maintain_all(archive)
        kept_quiet = sum(archive.get({"documentId": d})["state"] == "live" for d in still_named)
        clock.at(last_call + 7 + 14 + 0.01)
        maintain_all(archive)
        expired_after = sum(archive.get({"documentId": d})["state"] == "expired" for d in still_named)
    return {
        "days": days,
        "sessions": sessions,
        "engineDocuments": engine,
        **checks,
        "leftTheWindow": len(left),
        "namedAtTheEnd": len(still_named),
        "liveAfter7Plus14DaysQuiet": kept_quiet,
        "expiredAfterThat": expired_after,
        "served": shown_through_serve(root),
    }


def shown_through_serve(root: Path, sessions: int = 3, rounds: int = 30) -> dict:
    """The same through a real `cwa serve` (maintenance every 0.1 s) and `cwa maintain` beside it."""
    import subprocess

    from session_helpers import Transcript

    folder, env = _folder(root, "shown-serve")
    child = subprocess.Popen(
        [sys.executable, "-m", "cwa", "serve", "--no-background", "--maintenance-interval", "0.1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    transcripts = [Transcript(start=YEAR_AGO) for _ in range(sessions)]
    named: set[str] = set()
    sent, maintains = 0, 0
    try:
        for number in range(rounds):
            for session, transcript in enumerate(transcripts):
                transcript.user(f"round {number}: what does the log say?")
                transcript.tool("\n".join(f"entry {session}.{number}.{k}: status {k % 7}" for k in range(1_200)))
                transcript.assistant("Read it.")
                sent += 1
                child.stdin.write(
                    json.dumps(
                        {
                            "id": sent,
                            "method": "session-context",
                            "params": {
                                "project": "/soak/shown",
                                "sessionId": f"served-{session}",
                                "messages": transcript.messages,
                            },
                        }
                    ).encode()
                    + b"\n"
                )
                child.stdin.flush()
                named |= _named(json.loads(child.stdout.readline())["result"]["messages"])
            maintains += (
                subprocess.run([sys.executable, "-m", "cwa", "maintain"], env=env, capture_output=True).returncode == 0
            )
            time.sleep(0.1)  # serve's own passes run meanwhile
    finally:
        child.stdin.close()
        child.wait(60)
    from cwa.api import Archive

    with Archive.open(workers.path_of(folder)) as archive:
        states = [archive.get({"documentId": d})["state"] for d in named]
        expired = archive.conn.execute("SELECT count(*) FROM documents WHERE state = 'expired'").fetchone()[0]
    return {
        "requests": sent,
        "maintainRuns": maintains,
        "named": len(named),
        "namedNotLive": sum(s != "live" for s in states),
        "expiredInTheArchive": expired,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--documents", type=int, default=3000)
    parser.add_argument("--days", type=int, default=20, help="simulated days of the shown phase")
    parser.add_argument(
        "--phases",
        default="admission,checkpoint,maintenance,rebuild,concurrent,waits,shown",
        help="comma-separated subset to run",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cwa-soak-"))
    share = args.kills // 5
    rng = random.Random(2026)
    started = time.monotonic()
    phases = {}
    wanted = set(args.phases.split(","))
    for name, run, count in (
        ("admission", workers.admission_kills, 2 * share),
        ("checkpoint", lambda f, e, n, r: workers.checkpoint_kills(f, e, n, r, megabytes=2), share),
        ("maintenance", workers.maintenance_kills, share),
        ("rebuild", workers.rebuild_kills, args.kills - 4 * share),
    ):
        if name not in wanted:
            continue
        folder, env = _folder(root, name)
        began = time.monotonic()
        phases[name] = {**run(folder, env, count, rng), "phaseSeconds": round(time.monotonic() - began, 1)}
        print(f"{name}: {phases[name]}", file=sys.stderr)
    together = concurrent(root, args.seconds) if "concurrent" in wanted else None
    print(f"concurrent: {together}", file=sys.stderr)
    during = waits(root, args.documents) if "waits" in wanted else None
    kept = shown(root, args.days) if "shown" in wanted else None
    print(f"shown: {kept}", file=sys.stderr)
    result = {
        "kills": {name: p["kills"] for name, p in phases.items()},
        "killsTotal": sum(p["kills"] for p in phases.values()),
        "phases": phases,
        "concurrent": together,
        "readsDuring": during,
        "shown": kept,
        "seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(result, indent=2) if args.json else json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
