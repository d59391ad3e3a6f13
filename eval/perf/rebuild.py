"""How long `index rebuild` takes, and how long it holds the write lock at a time.

    python eval/perf/rebuild.py [--documents 3000] [--runs 3] [--json]

Seeds an archive of `--documents` turns (two messages of 200 varied words each, semantic
retrieval off), then times `Archive.call("index-rebuild")` `--runs` times; meanwhile a second
connection in a thread tries a tiny write every 5 ms and records how long each waited for the lock
(the longest is what a read's bookkeeping or a preflight decision could wait).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.api import Archive  # noqa: E402
from cwa.config import load_settings  # noqa: E402

QUIET = {"CWA_SEMANTIC_RETRIEVAL": "false", "CWA_DISK_CRITICAL_MEBIBYTES": "0"}


def seed(archive: Archive, documents: int) -> None:
    rng = random.Random(documents)
    vocabulary = [f"term{i}" for i in range(4000)]
    for number in range(documents):
        archive.admit({"project": "/bench/rebuild", "sessionId": f"s{number % 10}", "kind": "turn", "messages": [
            {"role": "user", "text": f"retry budget {number} " + " ".join(rng.choice(vocabulary) for _ in range(200))},
            {"role": "assistant", "text": " ".join(rng.choice(vocabulary) for _ in range(200))}]})


def probe(path: Path, stop: threading.Event, waits: list[float]) -> None:
    """A tiny write every 5 ms from another connection: how long each waited for the lock."""
    import apsw

    conn = apsw.Connection(str(path))
    conn.set_busy_timeout(60_000)
    conn.execute("CREATE TABLE IF NOT EXISTS probe (at REAL)")
    while not stop.is_set():
        started = time.perf_counter()
        conn.execute("INSERT INTO probe VALUES (?)", (started,))
        waits.append(time.perf_counter() - started)
        time.sleep(0.005)
    conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    path = Path(tempfile.mkdtemp(prefix="cwa-rebuild-")) / "archive.db"
    archive = Archive.open(path, settings=load_settings(None, env=QUIET))
    seed(archive, args.documents)
    seconds, longest = [], []
    for _ in range(args.runs):
        waits: list[float] = []
        stop = threading.Event()
        thread = threading.Thread(target=probe, args=(path, stop, waits))
        thread.start()
        started = time.perf_counter()
        archive.call("index-rebuild", {})
        seconds.append(time.perf_counter() - started)
        stop.set()
        thread.join()
        longest.append(max(waits))
    result = {"documents": args.documents, "rebuildSeconds": [round(s, 2) for s in seconds],
              "rebuildSecondsMedian": round(statistics.median(seconds), 2),
              "longestLockWaitMs": [round(w * 1000, 1) for w in longest]}
    print(json.dumps(result, indent=2 if args.json else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
