"""The serve-side latency table of `cwa eval perf` on an archive that already exists.

    python eval/perf/operations.py ARCHIVE [--corpus coding] [--queries 100] [--sessions NAME] [--json]
    python eval/perf/operations.py ARCHIVE --bytes

Times preflight, exact, lexical and hybrid search, recall and gather through one `cwa serve` of
the tree on PYTHONPATH (eval/perf/scale.py's `operations`, the same queries), on ARCHIVE, e.g.
one kept by `cwa eval perf --keep`: two trees measured on the same archive, one after the other,
without building it twice. Preflight writes its decisions to the archive's hint ledger, so each
run names its sessions apart (`--sessions`, default a fresh name per run). With --bytes, it
splits the file's bytes by kind instead (`cwa eval perf`'s split, per byte of the messages' text),
with and without the vectors and the free pages a migration left.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa_eval.perf.scale import CORPORA, bytes_by_kind, operations


def archive_bytes(path: Path) -> dict:
    import apsw

    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    text = conn.execute("SELECT sum(end_byte - text_start) FROM messages").fetchone()[0]  # the texts admitted
    conn.close()
    split = bytes_by_kind(path, text)
    kinds = split["kinds"]
    return {
        **split,
        "textBytes": text,
        "lessFree": round((split["file"] - kinds["free"]) / text, 2),
        "withoutVectorsLessFree": round((split["file"] - kinds["free"] - kinds["vectors"]) / text, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="coding")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--sessions", default=f"ops-{os.getpid()}-{int(time.time())}")
    parser.add_argument("--bytes", action="store_true", help="split the file's bytes by kind instead")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.bytes:
        print(orjson.dumps(archive_bytes(args.archive), option=orjson.OPT_INDENT_2).decode())
        return
    latency, rss = operations(args.archive, args.corpus, args.queries, args.sessions)
    if args.json:
        print(orjson.dumps({"latency": latency, "servePeakRssBytes": rss}).decode())
        return
    print(f"{'operation':<12}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}")
    for name, timing in latency.items():
        if timing["n"]:
            print(f"{name:<12}{timing['p50_ms']:>10}{timing['p95_ms']:>10}{timing['p99_ms']:>10}")
    print(f"serve peak RSS {rss / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
