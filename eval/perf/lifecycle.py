"""Retention at work: how long expiry and purge passes take, and how much space comes back.

    python eval/perf/lifecycle.py --windows 10000 [--windows 100000] [--limit 500] [--json]

Builds the synthetic archive of eval/perf/search.py (its documents dated today), moves the clock
past the conversation retention (91 days), then runs `maintain` passes of `--limit` rows until no
work is left, timing each, and finally one `maintain --vacuum`. Reports the file size before,
after the incremental passes and after the VACUUM, the median and worst pass time, and how long a
writer had to wait: meanwhile a second connection (its own thread) takes the write lock with an
empty `BEGIN IMMEDIATE; COMMIT` every 5 ms and records its longest wait, which is what a request
arriving during maintenance would see.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import for_each_size, percentile
from search import build

from cwa.api import Archive
from cwa.store.connection import open_connection
from cwa.timestamps import shift, utc_now


class WriterProbe:
    """Takes the write lock every 5 ms from its own connection and keeps the longest wait."""

    def __init__(self, path: Path) -> None:
        self.path, self.waits, self.stop = path, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        conn = open_connection(self.path)
        while not self.stop.wait(0.005):
            began = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("COMMIT")
            self.waits.append((time.perf_counter() - began) * 1000)
        conn.close()

    def __enter__(self) -> WriterProbe:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def run(windows: int, limit: int = 500) -> dict:
    start = utc_now()
    now = [start]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "archive.db"
        with Archive.open(path, clock=lambda: now[0]) as archive:
            documents = build(archive, windows)
            archive.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            before = path.stat().st_size
            now[0] = shift(start, 91 * 86_400)
            passes, expired, purged = [], 0, 0
            with WriterProbe(path) as probe:
                while True:
                    began = time.perf_counter()
                    result = archive.call("maintain", {"limit": limit})
                    passes.append((time.perf_counter() - began) * 1000)
                    expired += result["expired"]
                    purged += result["purged"]
                    if not result["more"]:
                        break
            archive.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            incremental = path.stat().st_size
            began = time.perf_counter()
            archive.call("maintain", {"vacuum": True})
            vacuum_ms = (time.perf_counter() - began) * 1000
            after = path.stat().st_size
    return {
        "windows": windows,
        "documents": documents,
        "limit": limit,
        "expired": expired,
        "purged": purged,
        "passes": len(passes),
        "pass_p50_ms": round(percentile(passes, 0.5), 1),
        "pass_max_ms": round(max(passes), 1),
        "file_bytes_before": before,
        "file_bytes_after_passes": incremental,
        "file_bytes_after_vacuum": after,
        "vacuum_ms": round(vacuum_ms, 1),
        "writer_wait_p50_ms": round(percentile(probe.waits, 0.5), 2),
        "writer_wait_max_ms": round(max(probe.waits), 1),
        "writer_probes": len(probe.waits),
    }


def show(result: dict) -> None:
    mib = 1 << 20
    print(
        f"{result['documents']} documents ({result['windows']}+ windows): {result['expired']} expired, "
        f"{result['purged']} purged in {result['passes']} passes of {result['limit']} "
        f"(p50 {result['pass_p50_ms']} ms, max {result['pass_max_ms']} ms)"
    )
    print(
        f"  file {result['file_bytes_before'] / mib:.1f} MiB -> {result['file_bytes_after_passes'] / mib:.1f} MiB "
        f"after the passes (incremental vacuum) -> {result['file_bytes_after_vacuum'] / mib:.1f} MiB after "
        f"VACUUM ({result['vacuum_ms']} ms)"
    )
    print(
        f"  a writer arriving meanwhile waited p50 {result['writer_wait_p50_ms']} ms, "
        f"at most {result['writer_wait_max_ms']} ms ({result['writer_probes']} probes)"
    )


def options(parser) -> None:
    parser.add_argument("--limit", type=int, default=500, help="rows each task may touch per pass")


if __name__ == "__main__":
    for_each_size(__doc__, run, show, options)
