"""Draw docs/performance.png: p95 latency of each operation against archive size, with the floor.

    cwa eval perf --sizes 10000,100000,1000000 --corpora coding --json > perf.json
    python eval/perf/plot_scale.py perf.json [more.json …] [--corpus coding] [--out docs/performance.png]

Every report's runs of the corpus are drawn together (a 1M run may come from its own report).
Needs matplotlib (`pip install 'cwa[eval]'`). Log-log axes; the dashed line is the bare-FTS5 floor
(the same lexical queries on a bare FTS5 table of the same window texts).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

OPERATIONS = ("preflight", "exact", "lexical", "hybrid", "recall3", "gather")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", type=Path, nargs="+", help="JSON of `cwa eval perf --json`")
    parser.add_argument("--corpus", default="coding")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[2] / "docs" / "performance.png")
    args = parser.parse_args(argv)
    runs = sorted(
        (
            run
            for path in args.reports
            for run in orjson.loads(path.read_bytes())["runs"]
            if run["corpus"] == args.corpus
        ),
        key=lambda run: run["admission"]["windows"],
    )
    if not runs:
        raise SystemExit(f"no run of corpus {args.corpus!r} in the reports")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [run["admission"]["windows"] for run in runs]
    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    for name in OPERATIONS:
        points = [(size, run["latency"][name]["p95_ms"]) for size, run in zip(sizes, runs) if run["latency"][name]["n"]]
        if points:
            axes.plot(*zip(*points), marker="o", label=name)
    axes.plot(
        sizes,
        [run["floor"]["lexical"]["p95_ms"] for run in runs],
        linestyle="--",
        color="black",
        marker="s",
        label="bare FTS5 floor (lexical)",
    )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("windows in the archive")
    axes.set_ylabel("p95 latency through `cwa serve` (ms)")
    axes.grid(alpha=0.3, which="both")
    axes.set_title(f"cwa eval perf, {args.corpus} corpus")
    axes.legend(fontsize=8, loc="upper left")
    figure.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
