"""Where recall is lost at length: the pool figures of docs/evaluation.md ("Eight histories a size").

    python eval/perf/long_pools.py [--tokens 1000000] [--histories 4] [--seed 41] [--hybrid] [--json]

`cwa eval long --inside` histories (eval/retrieval/long_history.py, facts inside long messages),
the shipped ranker. For each question, its `explain` pool: the share of evidence messages in the
pool (with `--hybrid`, `semanticPolicy: always`, and which mode found each: BM25F or meaning),
in the top 10 and the top 5, overall and by kind; then the ranker's mean features of the pool's
evidence it leaves out of the top 10, of the evidence it keeps, and of its top 3 candidates.
`--hybrid` embeds every window first (minutes at 500K tokens).
"""

from __future__ import annotations

import argparse
import collections
import tempfile
from pathlib import Path

import orjson

from cwa.api import Archive
from cwa.retrieve import ranker
from cwa_eval.retrieval.long_history import admit_histories, history, project

PER_KIND = 4


def run(tokens: int, histories: int, seed: int, hybrid: bool) -> dict:
    made = [history(seed + i, tokens, PER_KIND, inside=True) for i in range(histories)]
    shares: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    left, kept, top = [], [], []
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "long.db") as archive:
        admit_histories(archive, made)
        if hybrid:
            archive.call("index-embed", {})
        for index, made_history in enumerate(made):
            for fact in made_history.facts:
                found = archive.search(
                    {
                        "project": project(index),
                        "query": fact.question,
                        "limit": 10,
                        "leaseSeconds": 0,
                        "semanticPolicy": "always" if hybrid else "never",
                        "explain": True,
                    }
                )
                pool = found["ranking"]["pool"]
                ranked = [r["source"]["messageKey"] for r in found["results"]]
                by_mode = {
                    mode: {p["messageKey"] for p in pool if any(m.startswith(mode) for m in p["modes"])}
                    for mode in ("lexical", "semantic")
                }
                found_sets = {
                    "pool": {p["messageKey"] for p in pool},
                    "lexical": by_mode["lexical"],
                    "semantic": by_mode["semantic"],
                    "top10": set(ranked[:10]),
                    "top5": set(ranked[:5]),
                }
                for name in ("overall", fact.kind):
                    shares[name]["evidence"] += len(fact.evidence)
                    for stage, keys in found_sets.items():
                        shares[name][stage] += len(fact.evidence & keys)
                for entry in pool:
                    if entry["messageKey"] in fact.evidence:
                        (kept if entry["messageKey"] in found_sets["top10"] else left).append(entry["features"])
                top.extend(entry["features"] for entry in pool[:3])

    def means(rows: list[list[float]]) -> dict[str, float]:
        return {
            name: round(sum(r[i] for r in rows) / len(rows), 3) if rows else None
            for i, name in enumerate(ranker.FEATURES)
        }

    return {
        "tokens": tokens,
        "histories": histories,
        "seed": seed,
        "hybrid": hybrid,
        "shares": {
            name: {stage: round(n / counts["evidence"], 3) for stage, n in counts.items() if stage != "evidence"}
            for name, counts in shares.items()
        },
        "evidenceLeftOut": len(left),
        "evidenceKept": len(kept),
        "features": {"leftOut": means(left), "kept": means(kept), "top3": means(top)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--histories", type=int, default=4)
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--hybrid", action="store_true", help="semanticPolicy always (embeds every window first)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.tokens, args.histories, args.seed, args.hybrid)
    if args.json:
        print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
        return
    for name, share in result["shares"].items():
        print(f"{name:12s} " + "  ".join(f"{stage} {value:.3f}" for stage, value in share.items()))
    print(f"pool evidence left out of the top 10: {result['evidenceLeftOut']}, kept: {result['evidenceKept']}")
    print(f"{'feature':14s} {'left out':>9s} {'kept':>9s} {'top 3':>9s}")
    for name in ranker.FEATURES:
        row = [result["features"][k][name] for k in ("leftOut", "kept", "top3")]
        print(f"{name:14s} " + " ".join(f"{'-' if v is None else f'{v:.3f}':>9s}" for v in row))


if __name__ == "__main__":
    main()
