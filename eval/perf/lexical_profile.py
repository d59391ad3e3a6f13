"""Where lexical search's time goes on an existing archive, query by query.

    python eval/perf/lexical_profile.py ARCHIVE [--project P] [--queries 100] [--fts5-only]
                                        [--results FILE] [--json]
    python eval/perf/lexical_profile.py ARCHIVE --calibrate

Runs `cwa eval perf`'s lexical queries (eval/perf/scale.py, the same seed) as `search` with
`semanticPolicy: never` on ARCHIVE (e.g. one kept by `cwa eval perf --keep`), with its FTS5
ranking statements and its reads of which windows are admissible (`windows.admissible`) timed,
and reports the latency percentiles (whole search, its FTS5 ranking statements, its admissible
reads, the rest), then for the slowest tenth of the queries each ranking statement: its
match expression, expected and actual matches, rows, milliseconds, and the milliseconds FTS5
takes to walk its posting lists without ranking (a count of every window it matches).
--fts5-only ranks every expression with FTS5's bm25(), as search did before cwa_bm25: the
baseline. --results FILE writes each query's result documents, a JSON line a query: two trees'
files on the same archive compare with `cmp`. With --calibrate, it measures the constants of the rule that picks between FTS5's
bm25() and cwa_bm25 (cwa/retrieve/bm25.py).
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
from cwa.index.lexical import WEIGHTS
from cwa.store.sqlfiles import queries
from cwa_eval.perf.bench import latency
from cwa_eval.perf.scale import PROJECTS, lexical_queries


def timed_rankings(calls: list[dict]) -> None:
    """Record each FTS5 ranking statement lexical search runs: its expression, expected matches,
    the newest-id slice it was scored over, rows and milliseconds."""
    original = search_module._bm25f

    def bm25f(ctx, match: str, expected: float, *rest, **options):
        rank = original(ctx, match, expected, *rest, **options)

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


def timed_admissible(spent: list[float]) -> None:
    """Add the milliseconds of each `windows.admissible` call (which windows are live, in scope and
    not visible, with their rows) to `spent`."""
    from cwa.retrieve import neighbors, windows

    original = windows.admissible

    def admissible(ctx, scores):
        started = time.perf_counter()
        try:
            return original(ctx, scores)
        finally:
            spent.append((time.perf_counter() - started) * 1000)

    windows.admissible = neighbors.admissible = admissible


# Every window an expression matches, counted without ranking: FTS5's walk of its posting lists.
WALK = "SELECT count(*) FROM window_fts WHERE window_fts MATCH ?"


def profile(db: Path, project: str, count: int, fts5_only: bool = False, results: Path | None = None) -> dict:
    calls: list[dict] = []
    timed_rankings(calls)
    reads: list[float] = []
    timed_admissible(reads)
    if fts5_only:  # FTS5's bm25() for every expression, as before cwa_bm25 (the baseline)
        from cwa.retrieve import bm25

        bm25.cheaper = lambda *_: False
    found, shown = [], []
    with Archive.open(db) as archive:
        archive.call("search", {"project": project, "query": "warm up", "semanticPolicy": "never", "leaseSeconds": 0})
        for query in lexical_queries(count):
            calls.clear()
            reads.clear()
            started = time.perf_counter()
            answer = archive.call(
                "search",
                {"project": project, "query": query, "limit": 10, "semanticPolicy": "never", "leaseSeconds": 0},
            )
            elapsed = (time.perf_counter() - started) * 1000
            shown.append({"query": query, "documents": [hit["documentId"] for hit in answer["results"]]})
            ranking = round(sum(c["ms"] for c in calls), 2)
            found.append(
                {
                    "query": query,
                    "ms": round(elapsed, 2),
                    "rankingMs": ranking,
                    "admissibleMs": round(sum(reads), 2),
                    "rankings": list(calls),
                }
            )
        slowest = sorted(found, key=lambda f: -f["ms"])[: max(1, count // 10)]
        if results is not None:  # two trees' files compare with `cmp`
            results.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in shown))
        for ranking in (r for f in slowest for r in f["rankings"]):  # FTS5 walking the lists alone
            started = time.perf_counter()
            matches = archive.conn.execute(WALK, (ranking["match"],)).fetchone()[0]
            ranking.update(matches=matches, walkMs=round((time.perf_counter() - started) * 1000, 2))
    return {
        "latency": latency([f["ms"] for f in found]),
        "rankingLatency": latency([f["rankingMs"] for f in found]),
        "admissibleLatency": latency([f["admissibleMs"] for f in found]),
        "outsideRankingLatency": latency([f["ms"] - f["rankingMs"] for f in found]),
        "slowest": slowest,
    }


def calibrate(db: Path) -> dict:
    """The constants of cwa/retrieve/bm25.py's cost rule, measured on this archive: the AND of its
    two and of its four commonest terms, ranked by bm25() and by cwa_bm25 over every window and
    over the newest tenth (best of three). Two ranges of one expression give FTS5's cost a row
    and, from the rest, a posting; the two expressions give cwa_bm25's cost a row and a phrase."""
    import statistics

    from cwa.retrieve import bm25  # here: a tree from before it is profiled too

    sql = queries("search")
    with Archive.open(db) as archive:
        conn = archive.conn
        bm25.register(conn)
        common = [
            t
            for (t,) in conn.execute("SELECT term FROM window_vocab WHERE term GLOB '[a-z]*' ORDER BY doc DESC LIMIT 4")
        ]
        newest = conn.execute(sql["newest_window"]).fetchone()[0]

        def best(statement: str, params: dict) -> float:
            timings = []
            for _ in range(3):
                started = time.perf_counter()
                conn.execute(statement, params).fetchall()
                timings.append((time.perf_counter() - started) * 1e6)
            return min(timings)

        runs = []
        for terms in (common[:2], common):
            match = " AND ".join(f'"{t}"' for t in terms)
            hits = [conn.execute(sql["term_frequency"], (t,)).fetchone()[0] for t in terms]
            for low in (0, newest - newest // 10):
                rows = conn.execute(
                    "SELECT count(*) FROM window_fts WHERE window_fts MATCH ? AND rowid > ?", (match, low)
                ).fetchone()[0]
                shared = {"match": match, "k": 40, "low": low, "high": newest}
                runs.append(
                    {
                        "match": match,
                        "postings": sum(hits),
                        "phrases": len(terms),
                        "rows": rows,
                        "fts5Us": best(
                            sql["lexical_top"],
                            {**shared, **WEIGHTS},
                        ),
                        "knownUs": best(
                            sql["lexical_top_known_idf"], {**shared, "hits": orjson.dumps(hits).decode(), "own": 0}
                        ),
                    }
                )
    fts5_row = statistics.mean((a["fts5Us"] - b["fts5Us"]) / (a["rows"] - b["rows"]) for a, b in (runs[0:2], runs[2:4]))
    posting = statistics.mean((r["fts5Us"] - fts5_row * r["rows"]) / r["postings"] for r in runs)
    per_row = {
        r["phrases"]: r["knownUs"] / r["rows"]
        for r in runs
        if r["rows"] == max(x["rows"] for x in runs if x["phrases"] == r["phrases"])
    }
    phrase = (per_row[len(common)] - per_row[2]) / (len(common) - 2)
    return {
        "runs": runs,
        "COUNT_POSTING_US": round(posting, 3),
        "FTS5_ROW_US": round(fts5_row, 2),
        "PYTHON_ROW_US": round(per_row[2] - 2 * phrase, 2),
        "PYTHON_PHRASE_US": round(phrase, 2),
        "inUse": {
            name: getattr(bm25, name)
            for name in ("COUNT_POSTING_US", "FTS5_ROW_US", "PYTHON_ROW_US", "PYTHON_PHRASE_US")
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--project", default=PROJECTS["coding"])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument(
        "--calibrate", action="store_true", help="measure cwa/retrieve/bm25.py's cost constants instead"
    )
    parser.add_argument("--fts5-only", action="store_true", help="rank every expression with FTS5's bm25()")
    parser.add_argument("--results", type=Path, help="write each query's result documents here, a JSON line each")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.calibrate:
        print(orjson.dumps(calibrate(args.archive), option=orjson.OPT_INDENT_2).decode())
        return
    report = profile(args.archive, args.project, args.queries, args.fts5_only, args.results)
    if args.json:
        print(orjson.dumps(report).decode())
        return
    for label in ("latency", "rankingLatency", "admissibleLatency", "outsideRankingLatency"):
        print(f"{label}: p50 / p95 {report[label]['p50_ms']} / {report[label]['p95_ms']} ms")
    for f in report["slowest"]:
        print(f"{f['ms']:8.1f} ms (FTS5 ranking {f['rankingMs']} ms)  {f['query']!r}")
        for c in f["rankings"]:
            print(
                f"    {c['ms']:7.1f} ms  {c['rows']:>4}/{c['k']} rows  expected {c['expected']:>8}  "
                f"matches {c['matches']:>8} (walked in {c['walkMs']} ms)  {c['match']}"
            )


if __name__ == "__main__":
    main()
