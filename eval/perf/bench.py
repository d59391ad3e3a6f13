"""Small helpers shared by the benchmarks in eval/perf/."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import apsw
import orjson


class CountingVFS(apsw.VFS):
    """SQLite's default VFS, noting the flags of every file opened through it (the default for new
    connections until `unregister()`)."""

    def __init__(self) -> None:
        self.under = apsw.vfs_names()[0]
        self.flags: list[int] = []
        super().__init__("counting", base=self.under, makedefault=True)

    def xOpen(self, name, flags):
        self.flags.append(flags[0])
        return apsw.VFSFile(self.under, name, flags)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def timed(action: Callable[[], object]) -> float:
    """Milliseconds one call of `action` takes."""
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) * 1000


def latency(values: list[float]) -> dict:
    return {"p50_ms": round(percentile(values, 0.5), 3), "p95_ms": round(percentile(values, 0.95), 3), "n": len(values)}


def for_each_size(
    doc: str, run: Callable[..., dict], show: Callable[[dict], None], extra: Callable | None = None
) -> None:
    """`--windows N` (repeatable, default 10,000): run and print (or `--json`) each size.
    `extra(parser)` may add options; they are passed to `run` as keyword arguments."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--windows", type=int, action="append", help="repeatable; default 10000")
    parser.add_argument("--json", action="store_true")
    if extra:
        extra(parser)
    args = vars(parser.parse_args())
    sizes, as_json = args.pop("windows"), args.pop("json")
    for windows in sizes or [10_000]:
        result = run(windows, **args)
        if as_json:
            print(orjson.dumps(result).decode())
        else:
            show(result)
