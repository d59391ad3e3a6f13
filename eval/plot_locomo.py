"""Draw docs/locomo-recall.png: turn-level recall@k of each LoCoMo mode against the reference points.

    cwa eval locomo --data …/locomo10.json --json > locomo.json
    python eval/plot_locomo.py locomo.json [--out docs/locomo-recall.png]

Needs matplotlib (`pip install 'cwa[eval]'`). The bare SQLite FTS5 floor is a mode of the report
(`fts5`); the learned modes are out of fold. The reference points are on the same file and metric
(all 1,982 questions with evidence): the LoCoMo paper's DRAGON dense retriever, and the target of
the [ranking] issue, R@5 ≥ 0.70 and R@10 ≥ 0.80.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

REFERENCES = {
    "DRAGON (LoCoMo paper)": {5: 0.588, 10: 0.675},
    "target": {5: 0.70, 10: 0.80},
}
KS = (1, 5, 10)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="the JSON of `cwa eval locomo --json`")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "locomo-recall.png")
    args = parser.parse_args(argv)
    report = orjson.loads(args.report.read_bytes())

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    for mode, found in report["modes"].items():
        values = [found["overall"][f"R@{k}"] for k in KS]
        label = (
            "bare SQLite FTS5 (floor)"
            if mode == "fts5"
            else f"cwa {mode}" + (" (out of fold)" if "training" in found else "")
        )
        axes.plot(KS, values, marker="o", label=label)
    markers = {"DRAGON (LoCoMo paper)": "D", "target": "*"}
    for name, points in REFERENCES.items():
        ks = sorted(points)
        axes.plot(
            ks,
            [points[k] for k in ks],
            linestyle="--",
            marker=markers[name],
            color="grey" if name != "target" else "black",
            alpha=0.8,
            label=name,
        )
    axes.set_xticks(KS)
    axes.set_xlabel("k (top turns)")
    axes.set_ylabel("turn-level recall@k")
    axes.set_ylim(0, 1)
    axes.grid(alpha=0.3)
    axes.set_title(f"LoCoMo, {next(iter(report['modes'].values()))['questions']} questions with evidence")
    axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
