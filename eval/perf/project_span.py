"""Lexical search bounded to the project's window range, against the same search unbounded.

    python eval/perf/project_span.py [--data ../shared/data/locomo/locomo10.json] [--haystack 100000]
        [--interleave] [--json]

One archive of LoCoMo's ten conversations, a project each (with `--haystack`, every project grown
to that many tokens: eval/retrieval/haystack.py), so each project is about a tenth of the archive.
Every question with evidence is asked of its conversation's project three ways, in turn (the
order rotating per question) in this process: as search runs it (`bounded`: FTS5 bounded to the
project's window ids, migration 0026, and the postings budget counted within them); with the
budget counted over the whole archive (`archiveBudget`, the rule before the budget followed the
bound); and with the bound lifted too (`unbounded`: every id, as before both). Reported: search
p50 / p95 of each, how many questions got the same documents in the same order as `bounded`, and
R@1/5/10 of each with the shipped ranker (in sample for LoCoMo: only the differences say anything).
`--interleave` admits the projects' documents in turn, one of each project after another (a user
whose sessions alternate between projects), instead of one project after another.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import percentile

from cwa.api import Archive
from cwa.retrieve import context, search
from cwa_eval.retrieval import locomo

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo10.json"


def build(archive: Archive, conversations: list[dict], haystack: int, interleave: bool) -> None:
    """Every project's documents, one project after another or (`interleave`) in turn."""
    if not interleave:
        locomo.ingest(archive, conversations)
        if haystack:
            locomo.ingest_haystack(archive, conversations, haystack)
        return
    admit, queued = archive.admit, {}
    archive.admit = lambda request: queued.setdefault(request["project"], []).append(request)
    try:
        locomo.ingest(archive, conversations)
        if haystack:
            locomo.ingest_haystack(archive, conversations, haystack)
    finally:
        archive.admit = admit
    for request in itertools.chain.from_iterable(itertools.zip_longest(*queued.values())):
        if request is not None:
            admit(request)


def run(data: Path, haystack: int, interleave: bool = False) -> dict:
    conversations = locomo.load(data)
    bounded, postings = search.window_span, search._postings
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "a.db") as archive:
        started = time.perf_counter()
        build(archive, conversations, haystack, interleave)
        report = {
            "haystack": haystack,
            "interleave": interleave,
            "buildSeconds": round(time.perf_counter() - started, 1),
        }
        report["windows"] = archive.conn.execute("SELECT count(*) FROM windows").fetchone()[0]
        spans = [high - low + 1 for low, high in archive.conn.execute("SELECT low, high FROM project_window_spans")]
        report["rangeIds"] = {"min": min(spans), "max": max(spans)}  # ids a project's search walks
        asked = [
            (f"locomo:{c['sample_id']}", qa["question"], set(wanted))
            for c in conversations
            for qa, wanted, _ in locomo.questions(c)
            if wanted
        ]
        by_archive = lambda ctx, wanted, df, total: (df, total)  # noqa: E731
        ways = {  # window range, postings budget
            "bounded": (bounded, postings),
            "archiveBudget": (bounded, by_archive),
            "unbounded": (lambda ctx: context.UNBOUNDED, by_archive),
        }
        latency: dict[str, list[float]] = {way: [] for way in ways}
        recall: dict[str, list[dict]] = {way: [] for way in ways}
        same = {way: 0 for way in ways}
        try:
            for number, (project, question, wanted) in enumerate(asked):
                results = {}
                order = list(ways)
                for way in order[number % 3 :] + order[: number % 3]:  # rotate which goes first
                    search.window_span, search._postings = ways[way]
                    request = {"project": project, "query": question, "limit": 10, "leaseSeconds": 0}
                    began = time.perf_counter()
                    found = archive.search({**request, "semanticPolicy": "never", "rerank": False})["results"]
                    latency[way].append((time.perf_counter() - began) * 1000)
                    results[way] = [r["documentId"] for r in found]
                    recall[way].append(locomo.score_question(wanted, [r["source"]["messageKey"] for r in found]))
                for way in ways:
                    same[way] += results[way] == results["bounded"]
        finally:
            search.window_span, search._postings = bounded, postings
    report["questions"] = len(asked)
    report["sameAsBounded"] = same
    for way in ways:
        report[way] = {
            "p50Ms": round(percentile(latency[way], 0.5), 2),
            "p95Ms": round(percentile(latency[way], 0.95), 2),
            **{k: v for k, v in locomo._mean(recall[way]).items() if k.startswith("R@")},
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--haystack", type=int, default=0, help="tokens per project (0: LoCoMo alone)")
    parser.add_argument("--interleave", action="store_true", help="admit the projects' documents in turn")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = run(args.data, args.haystack, args.interleave)
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    print(f"{report['questions']} questions, {report['windows']} windows, built in {report['buildSeconds']} s")
    print(f"  a project's range spans {report['rangeIds']['min']} to {report['rangeIds']['max']} ids")
    for way in ("unbounded", "archiveBudget", "bounded"):
        row = report[way]
        print(
            f"  {way:10} p50 {row['p50Ms']} ms  p95 {row['p95Ms']} ms  R@1/5/10 {row['R@1']} / {row['R@5']} / {row['R@10']}"
        )
    print(f"  same results as bounded: {report['sameAsBounded']} of {report['questions']}")


if __name__ == "__main__":
    main()
