"""Search latency of two cwa trees on the same archive files: a before/after for ranking changes.

    python eval/perf/search_files.py build DIR [--data locomo10.json] [--windows 100000]
    PYTHONPATH=OTHER_CHECKOUT python eval/perf/search_files.py time DIR   # the other tree
    python eval/perf/search_files.py time DIR                            # this one

`build` writes, once, the archives both trees then read: LoCoMo's ten conversations with every
turn embedded (locomo.db), synthetic coding sessions (eval/retrieval/sessions.py) up to
`--windows` windows (coding.db), and the queries: LoCoMo's questions, and 300 two-to-four-word
queries of the coding vocabulary (seed 3). `time` copies each archive to a temporary folder
(leases and caches never touch the originals), warms up on 20 queries, then times every query:
LoCoMo lexical and hybrid, coding lexical; the learned ranker, no rerank. `--cold N` also times N
one-shot `cwa call search` processes on the coding archive (its first query; as `python -m cwa`,
so PYTHONPATH picks the tree there too); `--cold-only` skips the rest. It prints p50 / p95 in ms as JSON, with the
path of the cwa package that ran, so a run says which tree it measured.
The archives' schema must be one both trees open.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

import cwa  # whichever tree comes first on the path: PYTHONPATH picks the other one
from cwa.api import Archive
from cwa.store.sqlfiles import queries

CODING_PROJECT = "/bench/project"
MODES = {"lexical": "never", "hybrid": "always"}


def build(folder: Path, data: Path, windows: int) -> None:
    from cwa_eval.retrieval.locomo import ingest, load
    from cwa_eval.retrieval.sessions import WORDS, synthetic_sessions

    folder.mkdir(parents=True, exist_ok=True)
    conversations = load(data)
    with Archive.open(folder / "locomo.db") as archive:
        ingest(archive, conversations)
        archive.call("index-embed", {})
    questions = [[f"locomo:{c['sample_id']}", qa["question"]] for c in conversations for qa in c["qa"]]
    (folder / "locomo-queries.json").write_text(json.dumps(questions))
    with Archive.open(folder / "coding.db") as archive:
        source = synthetic_sessions(10**9, project=CODING_PROJECT)
        while archive.conn.execute(queries("search")["window_count"]).fetchone()[0] < windows:
            for _ in range(1000):
                archive.admit(next(source))
    rng = random.Random(3)
    coding = [[CODING_PROJECT, " ".join(rng.sample(WORDS, rng.randint(2, 4)))] for _ in range(300)]
    (folder / "coding-queries.json").write_text(json.dumps(coding))


def timed(folder: Path, name: str, mode: str) -> dict:
    queries = json.loads((folder / f"{name}-queries.json").read_text())
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / f"{name}.db"
        shutil.copy(folder / f"{name}.db", copy)
        latencies = []
        with Archive.open(copy) as archive:
            for warm, (project, query) in enumerate([*queries[:20], *queries]):
                begin = time.perf_counter()
                archive.search(
                    {
                        "project": project,
                        "query": query,
                        "limit": 10,
                        "leaseSeconds": 0,
                        "semanticPolicy": MODES[mode],
                        "ranker": "learned",
                        "rerank": False,
                    }
                )
                if warm >= 20:
                    latencies.append((time.perf_counter() - begin) * 1000)
    latencies.sort()
    return {
        "archive": name,
        "mode": mode,
        "queries": len(latencies),
        "p50Ms": round(latencies[len(latencies) // 2], 2),
        "p95Ms": round(latencies[int(len(latencies) * 0.95)], 2),
    }


def main() -> None:
    from cwa_eval.retrieval.locomo import DEFAULT_DATA

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("build", "time"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--windows", type=int, default=100_000)
    parser.add_argument("--cold", type=int, default=0, help="one-shot `cwa call search` processes to time")
    parser.add_argument("--cold-only", action="store_true", help="time only the one-shot processes")
    args = parser.parse_args()
    if args.cold_only and not args.cold:
        parser.error("--cold-only needs --cold N")
    if args.action == "build":
        build(args.folder, args.data, args.windows)
        return
    runs = []
    if not args.cold_only:
        runs = [timed(args.folder, "locomo", "lexical"), timed(args.folder, "locomo", "hybrid")]
        runs.append(timed(args.folder, "coding", "lexical"))
    found = {"cwa": cwa.__file__, "runs": runs}
    if args.cold:
        found["coldCallSearch"] = cold(args.folder, args.cold)
    print(json.dumps(found, indent=2))


def cold(folder: Path, runs: int) -> dict:
    """Wall-clock ms of one-shot `cwa call search` processes on a copy of the coding archive."""
    from cwa_eval.perf.scale import cold_start

    project, query = json.loads((folder / "coding-queries.json").read_text())[0]
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "coding.db"
        shutil.copy(folder / "coding.db", copy)
        request = json.dumps({"project": project, "query": query}).encode()
        return cold_start(["call", "search"], request, {"CWA_DB": str(copy)}, runs=runs, module=True)


if __name__ == "__main__":
    main()
