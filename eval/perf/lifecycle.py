"""Retention at work: how long expiry and purge passes take, and how much space comes back.

    python eval/perf/lifecycle.py --windows 10000 [--windows 100000] [--limit 500] [--json]

Builds the synthetic archive of eval/perf/search.py (its documents dated today), moves the clock
past the conversation retention (91 days), then runs `maintain` passes of `--limit` rows until no
work is left, timing each, and finally one `maintain --vacuum`. Reports the file size before,
after the incremental passes and after the VACUUM, and the median and worst pass time (the
longest the write lock is held for a pass's expiry or purge step is below the pass time).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import for_each_size, percentile  # noqa: E402
from search import build  # noqa: E402

from cwa.api import Archive  # noqa: E402
from cwa.timestamps import shift, utc_now  # noqa: E402


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
        "windows": windows, "documents": documents, "limit": limit, "expired": expired, "purged": purged,
        "passes": len(passes), "pass_p50_ms": round(percentile(passes, 0.5), 1), "pass_max_ms": round(max(passes), 1),
        "file_bytes_before": before, "file_bytes_after_passes": incremental, "file_bytes_after_vacuum": after,
        "vacuum_ms": round(vacuum_ms, 1),
    }


def show(result: dict) -> None:
    mib = 1 << 20
    print(f"{result['documents']} documents ({result['windows']}+ windows): {result['expired']} expired, "
          f"{result['purged']} purged in {result['passes']} passes of {result['limit']} "
          f"(p50 {result['pass_p50_ms']} ms, max {result['pass_max_ms']} ms)")
    print(f"  file {result['file_bytes_before'] / mib:.1f} MiB -> {result['file_bytes_after_passes'] / mib:.1f} MiB "
          f"after the passes (incremental vacuum) -> {result['file_bytes_after_vacuum'] / mib:.1f} MiB after "
          f"VACUUM ({result['vacuum_ms']} ms)")


def options(parser) -> None:
    parser.add_argument("--limit", type=int, default=500, help="rows each task may touch per pass")


if __name__ == "__main__":
    for_each_size(__doc__, run, show, options)
