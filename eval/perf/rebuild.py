"""How long `index rebuild` takes, and how long it holds the write lock at a time.

    python eval/perf/rebuild.py [--documents 3000] [--runs 3] [--json]

Seeds an archive of `--documents` turns (two messages of 200 varied words each, semantic
retrieval off), then times `Archive.call("index-rebuild")` `--runs` times; meanwhile another
process tries a tiny write every 5 ms (waiting for the lock as cwa's connections do) and records
how long each waited (the longest is what a read's bookkeeping or a preflight decision could wait).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.api import Archive
from cwa.config import load_settings
from cwa_eval.retrieval.sessions import prose_turns

QUIET = {"CWA_SEMANTIC_RETRIEVAL": "false", "CWA_DISK_CRITICAL_MEBIBYTES": "0"}


def seed(archive: Archive, documents: int) -> None:
    for document in prose_turns(documents):
        archive.admit(document)


def probe(path: str, stop, waits) -> None:
    """In another process: a tiny write every 5 ms, waiting for the lock the way cwa's own
    connections do; how long each waited."""
    from cwa.store import connection

    conn = connection.open_connection(path)
    if hasattr(connection, "wait_for_lock"):
        connection.wait_for_lock(conn, 600_000)
    else:  # a cwa from before wait_for_lock (a baseline run): SQLite's own busy timeout
        conn.set_busy_timeout(600_000)
    while True:  # at least one write, even one that waited for the whole rebuild
        started = time.perf_counter()
        conn.execute("INSERT INTO probe VALUES (?)", (started,))
        waits.append(time.perf_counter() - started)
        if stop.is_set():
            break
        time.sleep(0.005)
    conn.close()


def measure(path: Path, documents: int, runs: int) -> tuple[list[float], list[float]]:
    """Seed an archive at `path`, then time `runs` rebuilds with the probe writing beside each:
    the seconds of each, and the longest the probe waited during each."""
    archive = Archive.open(path, settings=load_settings(None, env=QUIET))
    seed(archive, documents)
    archive.conn.execute("CREATE TABLE probe (at REAL)")  # the probe's own table (this archive is a throwaway)
    seconds, longest = [], []
    spawn = multiprocessing.get_context("spawn")
    try:
        for _ in range(runs):
            with spawn.Manager() as manager:
                waits, stop = manager.list(), manager.Event()
                prober = spawn.Process(target=probe, args=(str(path), stop, waits))
                prober.start()
                while not len(waits):  # the probe is writing before the rebuild starts
                    time.sleep(0.01)
                started = time.perf_counter()
                archive.call("index-rebuild", {})
                seconds.append(time.perf_counter() - started)
                stop.set()
                prober.join()
                longest.append(max(waits))
    finally:
        archive.close()
    return seconds, longest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cwa-rebuild-") as folder:  # gone afterwards, whatever happens
        seconds, longest = measure(Path(folder) / "archive.db", args.documents, args.runs)
    result = {
        "documents": args.documents,
        "rebuildSeconds": [round(s, 2) for s in seconds],
        "rebuildSecondsMedian": round(statistics.median(seconds), 2),
        "longestLockWaitMs": [round(w * 1000, 1) for w in longest],
    }
    print(json.dumps(result, indent=2 if args.json else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
