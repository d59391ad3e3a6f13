"""Markdown tables of `cwa eval perf --json` reports, as docs/performance.md shows them.

    python eval/perf/tables.py after.json [more.json …] [--before before.json …]

One table per corpus: a column per size, a row per figure; with `--before`, each cell reads
"before → after" for the sizes both hold.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

OPERATIONS = ("preflight", "exact", "lexical", "hybrid", "recall3", "gather")


def runs(paths: list[Path]) -> dict[tuple[str, int], dict]:
    return {(run["corpus"], run["requested"]): run for path in paths for run in orjson.loads(path.read_bytes())["runs"]}


def rows(run: dict) -> dict[str, str]:
    a, f, b = run["admission"], run["floor"], run["bytes"]
    found = {
        "windows (documents)": f"{a['windows']:,} ({a['documents']:,})",
        "text": f"{a['textBytes'] / 2**20:.1f} MiB",
        "admission, windows/s (MB/s)": f"{a['windowsPerSecond']:,.0f} ({a['megabytesPerSecond']})",
        "floor insert, windows/s": f"{f['windowsPerSecond']:,.0f}",
        "admission / floor insert": f"{run['ratios']['admissionOverFloorInsert']}",
        "embedding, windows/s": f"{run['embedding']['windowsPerSecond']}",
    }
    for name in OPERATIONS:
        timing = run["latency"][name]
        if timing["n"]:
            found[f"{name}, p50 / p95 / p99 ms"] = (
                f"{timing['p50_ms']:.1f} / {timing['p95_ms']:.1f} / {timing['p99_ms']:.1f}"
            )
    floor = f["lexical"]
    found["floor FTS5 lexical, p50 / p95 / p99 ms"] = (
        f"{floor['p50_ms']:.1f} / {floor['p95_ms']:.1f} / {floor['p99_ms']:.1f}"
    )
    found["lexical p95 / floor p95"] = f"{run['ratios']['lexicalP95OverFloor']}"
    before = run["bytesBeforeEmbedding"]
    found["archive without vectors, × text"] = f"{before['withoutVectors']}"
    for kind, ratio in before["kindsPerTextByte"].items():
        if ratio >= 0.01 and kind not in ("free", "other", "vectors"):
            found[f"· {kind}, × text"] = f"{ratio}"
    found["· embedding queue (until embedded), × text"] = f"{before['kindsPerTextByte']['vectors']}"
    found["archive with vectors, × text"] = f"{b['perTextByte']}"
    found["floor file (FTS5 with its content), × text"] = f"{f['fileBytes'] / a['textBytes']:.2f}"
    found["serve peak RSS, MiB"] = f"{run['servePeakRssBytes'] / 2**20:.0f}"
    found["cold `cwa call search`, median ms"] = f"{run['coldCallSearch']['median_ms']:.0f}"
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("after", type=Path, nargs="+")
    parser.add_argument("--before", type=Path, nargs="*", default=[])
    args = parser.parse_args(argv)
    after, before = runs(args.after), runs(args.before)
    for corpus in dict.fromkeys(c for c, _ in after):
        sizes = sorted(size for c, size in after if c == corpus)
        print(f"\n{corpus}\n")
        print("| | " + " | ".join(f"{size:,} windows" for size in sizes) + " |")
        print("|---|" + "---|" * len(sizes))
        tables = {size: rows(after[corpus, size]) for size in sizes}
        olds = {size: rows(before[corpus, size]) for size in sizes if (corpus, size) in before}
        for name in tables[sizes[-1]] | tables[sizes[0]]:
            cells = []
            for size in sizes:
                now = tables[size].get(name, "")
                old = olds.get(size, {}).get(name)
                cells.append(
                    f"{old} → {now}" if old is not None and old != now and name != "windows (documents)" else now
                )
            print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
