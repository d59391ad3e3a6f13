"""What deflating a chunk costs and saves, by zlib level and state size (cwa/store/payloads.py).

    python eval/perf/deflate.py ARCHIVE [--files PATH ...] [--passes 3] [--json]

Reads every chunk of ARCHIVE (e.g. one `cwa eval perf --keep DIR` built), inflated to its bytes,
and deflates each again four ways: `payloads.packed` as cwa stores it (a window and hash table
sized to the chunk; level 6 up to FAST_ABOVE, 1 beyond); zlib's default state at level 6
(`zlib.compress`); and the sized state at level 6 and at level 1 for every chunk. For each way:
microseconds a chunk (the best of `--passes` passes) and the payloads' bytes over the chunks'
bytes (a payload no shorter than its bytes counts as the bytes, as cwa stores it), for the
chunks up to FAST_ABOVE and above it. `--files` adds files cut into chunks as admission cuts a
document (cwa/store/chunking.py): `cwa eval perf`'s corpora have no chunk above FAST_ABOVE.
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import apsw
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.store import payloads
from cwa.store.chunking import chunk_spans

WAYS: dict[str, Callable[[bytes], bytes]] = {
    "packed": payloads.packed,
    "defaultState6": lambda data: zlib.compress(data, 6),
    "sized6": lambda data: payloads.deflated(data, 6),
    "sized1": lambda data: payloads.deflated(data, 1),
}


def chunk_bytes(path: Path) -> list[bytes]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        found = conn.execute("SELECT id, byte_length, data FROM chunks ORDER BY id").fetchall()
    finally:
        conn.close()
    return [payloads.unpacked(data, length, chunk) for chunk, length, data in found]


def file_chunks(paths: list[Path]) -> list[bytes]:
    """Each file's bytes in the chunks admission would store them in."""
    found = []
    for path in paths:
        data = path.read_bytes()
        found.extend(data[start:end] for start, end in chunk_spans(data))
    return found


def measure(chunks: list[bytes], passes: int) -> dict:
    groups = {
        "small": [c for c in chunks if len(c) <= payloads.FAST_ABOVE],
        "large": [c for c in chunks if len(c) > payloads.FAST_ABOVE],
    }
    report: dict = {}
    for group, members in groups.items():
        total = sum(len(c) for c in members)
        report[group] = {"chunks": len(members), "bytes": total}
        if not members:
            continue
        for name, deflate in WAYS.items():
            best = float("inf")
            for _ in range(passes):
                started = time.perf_counter()
                stored = sum(min(len(deflate(c)), len(c)) for c in members)
                best = min(best, time.perf_counter() - started)
            report[group][name] = {
                "usPerChunk": round(best / len(members) * 1e6, 1),
                "ofBytes": round(stored / total, 3),
            }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--files", type=Path, nargs="+", default=[], metavar="PATH", help="files cut into chunks too")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = measure(chunk_bytes(args.archive) + file_chunks(args.files), args.passes)
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    for group, found in report.items():
        print(f"{group}: {found['chunks']:,} chunks, {found['bytes']:,} bytes")
        for name in WAYS:
            if name in found:
                print(
                    f"  {name:14} {found[name]['usPerChunk']:8.1f} µs a chunk  {found[name]['ofBytes']:.3f} of the bytes"
                )


if __name__ == "__main__":
    main()
