"""A cap on the results one LoCoMo session may hold near the top: does spreading them help?

    python eval/retrieval/session_cap.py --data ../shared/data/locomo/locomo10.json [--json]

A question whose evidence lies in several sessions (LoCoMo's multi-hop category 1: session R@5
0.53) might gain when the top of the list is spread over more sessions. This builds the archive
`cwa eval locomo` builds, trains its out-of-fold rankers, asks every question with evidence
(limit 20, `lexical` and `hybrid` modes) and re-orders each list offline: with a cap of C a
session in the top N, a result whose session already holds C of the top N waits until the top N
is full, then follows it in its order. R@5 and R@10, overall and by category, for the list as
ranked (`shipped`, the same figures as `cwa eval locomo`) and for each cap; `R@20` is how much
evidence the 20 results hold at all.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.api import Archive
from cwa_eval.retrieval import locomo

CAPS = ((1, 5), (2, 5), (3, 5), (1, 10), (2, 10), (3, 10))  # (a session's results, in the top N)
MODES = ("lexical", "hybrid")
LIMIT = 20


def capped(ranked: list[str], cap: int, top: int) -> list[str]:
    """`ranked` with at most `cap` results of a session in its first `top`; the ones held back
    follow the first `top`, in their order, then the rest."""
    kept: list[str] = []
    held: list[str] = []
    count: collections.Counter[str] = collections.Counter()
    for key in ranked:
        session = locomo.session_of(key)
        if len(kept) < top and count[session] >= cap:
            held.append(key)
            continue
        kept.append(key)
        count[session] += 1
    return kept[:top] + held + kept[top:]


def rankings(data: Path) -> dict[str, list[tuple[str, set[str], list[str]]]]:
    """Per mode, every question's (category, evidence, the top LIMIT message keys), out of fold."""
    conversations = locomo.load(data)
    found: dict[str, list[tuple[str, set[str], list[str]]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "locomo.db") as archive:
        locomo.ingest(archive, conversations)
        archive.call("index-embed", {})
        weights = locomo.train_folds(archive, conversations, Path(folder))["outOfFold"]
        base = archive.settings
        for mode in MODES:
            for index, conversation in enumerate(conversations):
                ranker = str(weights[locomo.fold_of(index, len(conversations))])
                archive.settings = replace(base, values={**base.values, "rankerPath": ranker})
                for qa, wanted, _ in locomo.questions(conversation):
                    if not wanted:
                        continue
                    request = {
                        "project": f"locomo:{conversation['sample_id']}",
                        "query": qa["question"],
                        "limit": LIMIT,
                        "leaseSeconds": 0,
                        **locomo.MODES[mode],
                    }
                    results = archive.search(request)["results"]
                    ranked = [r["source"]["messageKey"] for r in results]
                    found[mode].append((str(qa["category"]), wanted, ranked))
            archive.settings = base
    return found


def recall(wanted: set[str], ranked: list[str], k: int) -> float:
    return len(wanted & set(ranked[:k])) / len(wanted)


def figures(questions: list[tuple[str, set[str], list[str]]]) -> dict[str, dict]:
    """R@5 / R@10 overall and by category for the list as ranked and each cap; R@20."""
    orders = {"shipped": lambda ranked: ranked} | {
        f"cap {cap} in top {top}": (lambda ranked, cap=cap, top=top: capped(ranked, cap, top)) for cap, top in CAPS
    }
    report: dict[str, dict] = {}
    for name, order in orders.items():
        rows: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
        for category, wanted, ranked in questions:
            ordered = order(ranked)
            pair = (recall(wanted, ordered, 5), recall(wanted, ordered, 10))
            rows["all"].append(pair)
            rows[category].append(pair)
        report[name] = {
            group: {
                "R@5": round(sum(p[0] for p in pairs) / len(pairs), 4),
                "R@10": round(sum(p[1] for p in pairs) / len(pairs), 4),
            }
            for group, pairs in sorted(rows.items())
        }
    report["shipped"]["all"]["R@20"] = round(
        sum(recall(wanted, ranked, LIMIT) for _, wanted, ranked in questions) / len(questions), 4
    )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = {mode: figures(questions) for mode, questions in rankings(args.data).items()}
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    for mode, orders in report.items():
        print(mode)
        for name, groups in orders.items():
            cells = "  ".join(
                f"{group} {g['R@5']:.4f}/{g['R@10']:.4f}" + (f" R@20 {g['R@20']:.4f}" if "R@20" in g else "")
                for group, g in groups.items()
            )
            print(f"  {name:<16} {cells}")


if __name__ == "__main__":
    main()
