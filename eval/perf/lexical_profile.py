"""Where lexical search's time goes on an existing archive, query by query.

    python eval/perf/lexical_profile.py ARCHIVE [--project P] [--queries 100] [--json]

Runs `cwa eval perf`'s lexical queries (eval/perf/scale.py, the same seed) as `search` with
`semanticPolicy: never` on ARCHIVE (e.g. one kept by `cwa eval perf --keep`), with its FTS5
ranking statements timed, and reports the latency percentiles (whole search, its FTS5 ranking
statements, the rest), then for the slowest tenth of the queries each ranking statement: its
match expression, expected matches, rows and milliseconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import cwa.retrieve.search as search_module
from cwa.api import Archive
from cwa_eval.perf.bench import latency
from cwa_eval.perf.scale import PROJECTS, lexical_queries


def timed_rankings(calls: list[dict]) -> None:
    """Record each FTS5 ranking statement lexical search runs: its expression, expected matches,
    the newest-id slice it was scored over, rows and milliseconds."""
    original = search_module._bm25f

    def bm25f(ctx, match: str, expected: float, *rest):
        rank = original(ctx, match, expected, *rest)

        def timed_rank(k: int):
            started = time.perf_counter()
            ranked, short = rank(k)
            calls.append(
                {
                    "match": match,
                    "expected": round(expected),
                    "k": k,
                    "rows": len(ranked),
                    "ms": round((time.perf_counter() - started) * 1000, 2),
                }
            )
            return ranked, short

        return timed_rank

    search_module._bm25f = bm25f


def profile(db: Path, project: str, count: int) -> dict:
    calls: list[dict] = []
    timed_rankings(calls)
    found = []
    with Archive.open(db) as archive:
        archive.call("search", {"project": project, "query": "warm up", "semanticPolicy": "never", "leaseSeconds": 0})
        for query in lexical_queries(count):
            calls.clear()
            started = time.perf_counter()
            archive.call(
                "search",
                {"project": project, "query": query, "limit": 10, "semanticPolicy": "never", "leaseSeconds": 0},
            )
            elapsed = (time.perf_counter() - started) * 1000
            ranking = round(sum(c["ms"] for c in calls), 2)
            found.append({"query": query, "ms": round(elapsed, 2), "rankingMs": ranking, "rankings": list(calls)})
    slowest = sorted(found, key=lambda f: -f["ms"])[: max(1, count // 10)]
    return {
        "latency": latency([f["ms"] for f in found]),
        "rankingLatency": latency([f["rankingMs"] for f in found]),
        "outsideRankingLatency": latency([f["ms"] - f["rankingMs"] for f in found]),
        "slowest": slowest,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--project", default=PROJECTS["coding"])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = profile(args.archive, args.project, args.queries)
    if args.json:
        print(orjson.dumps(report).decode())
        return
    for label in ("latency", "rankingLatency", "outsideRankingLatency"):
        print(f"{label}: p50 / p95 {report[label]['p50_ms']} / {report[label]['p95_ms']} ms")
    for f in report["slowest"]:
        print(f"{f['ms']:8.1f} ms (FTS5 ranking {f['rankingMs']} ms)  {f['query']!r}")
        for c in f["rankings"]:
            print(f"    {c['ms']:7.1f} ms  {c['rows']:>4}/{c['k']} rows  expected {c['expected']:>8}  {c['match']}")


if __name__ == "__main__":
    main()
