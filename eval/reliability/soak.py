"""The reliability soak: the fault cycles of tests/test_faults.py at length, writers and readers
together, and how long reads wait while long maintenance runs.

    python eval/reliability/soak.py [--kills 200] [--seconds 20] [--json]

Phases: SIGKILL during admission, checkpoint, maintenance (with vacuum) and index rebuild (the
`--kills` split 2:1:1:1, each followed by the checks of the suite: integrity, digests of every
acknowledged document, no partial checkpoint usable, the same ids on retry); 4 writers and 4
readers for `--seconds` (throughput, errors, lost or duplicated documents); then, on an archive of
`--documents` turns, the longest round of reads (search, recall by locator, preflight) while an
`index rebuild`, a `maintain` that purges and vacuums incrementally, and a `maintain --vacuum`
(a full VACUUM, the one exclusive step) run in another process.
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

import fault_workers as workers  # noqa: E402
from conftest import hermetic_env  # noqa: E402


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
    return {"seconds": seconds, "admitted": len(acknowledged), "admissionsPerSecond": round(len(acknowledged) / seconds, 1),
            "readOps": sum(r["ops"] for r in read), "readsPerSecond": round(sum(r["ops"] for r in read) / seconds, 1),
            "longestReadMs": round(max(r["longest"] for r in read) * 1000, 1),
            "errors": sum(len(w["errors"]) for w in written) + sum(len(r["errors"]) for r in read),
            "lost": len(checked["missing"]) + len(checked["wrong"]),
            "duplicated": checked["liveTurns"] - 20 - len(acknowledged), "integrity": checked["integrity"]}


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--documents", type=int, default=3000)
    parser.add_argument("--phases", default="admission,checkpoint,maintenance,rebuild,concurrent,waits",
                        help="comma-separated subset to run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cwa-soak-"))
    share = args.kills // 5
    rng = random.Random(2026)
    started = time.monotonic()
    phases = {}
    wanted = set(args.phases.split(","))
    for name, run, count in (("admission", workers.admission_kills, 2 * share),
                             ("checkpoint", lambda f, e, n, r: workers.checkpoint_kills(f, e, n, r, megabytes=2), share),
                             ("maintenance", workers.maintenance_kills, share),
                             ("rebuild", workers.rebuild_kills, args.kills - 4 * share)):
        if name not in wanted:
            continue
        folder, env = _folder(root, name)
        began = time.monotonic()
        phases[name] = {**run(folder, env, count, rng), "phaseSeconds": round(time.monotonic() - began, 1)}
        print(f"{name}: {phases[name]}", file=sys.stderr)
    together = concurrent(root, args.seconds) if "concurrent" in wanted else None
    print(f"concurrent: {together}", file=sys.stderr)
    during = waits(root, args.documents) if "waits" in wanted else None
    result = {"kills": {name: p["kills"] for name, p in phases.items()},
              "killsTotal": sum(p["kills"] for p in phases.values()), "phases": phases,
              "concurrent": together, "readsDuring": during, "seconds": round(time.monotonic() - started, 1)}
    print(json.dumps(result, indent=2) if args.json else json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
