"""Where recall is lost in a long history: the figures of docs/evaluation.md's haystack section.

    python eval/perf/pool_recall.py [--haystack 100000] [--conversations 4] [--json]

LoCoMo (../shared/data/locomo/locomo10.json) with every project grown to the haystack
(eval/retrieval/haystack.py), the shipped ranker, lexical search. For the first conversations'
questions: the share of evidence turns in the learned ranker's pool (`explain`) at the shipped
pool (20 candidates from 40 BM25F windows) and at larger ones (the constants patched in this
process only), and in the floor's (bare FTS5) top 20 and top 50; with and without the fetch of
the windows holding a name the question writes (`NAMED_POOL`, set to 0 in this process), the
pool's share of evidence, the top 10's and the share of the top 10 that are distractors; then
search latency, alternating per query in this process, with near-duplicate collapsing as it is
and as it was before (full intersections) and with and without the fetch of names, and whether
both ways return the same results.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

import orjson

from cwa.api import Archive
from cwa.index.terms import STOP_WORDS
from cwa.retrieve import near_duplicates, search
from cwa_eval.retrieval import haystack, locomo

POOLS = ((20, 40), (50, 100), (100, 200))  # (ranker candidates, BM25F windows)


def _old_similar(a: frozenset, b: frozenset) -> bool:
    return len(a & b) >= near_duplicates.MIN_JACCARD * len(a | b)


def _ms(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))], 2)


def _set_similar(similar) -> None:
    near_duplicates.similar = similar


def _set_named(fetched: int) -> None:
    search.NAMED_POOL = fetched


def _alternately(asked: list, search_, ways: dict) -> dict:
    """Each question searched each way in turn (each way's setter called before its search):
    p50 / p95 ms a way, and whether every way returned the same results."""
    times: dict[str, list[float]] = {name: [] for name in ways}
    same = True
    for _, project, question, _ in asked:
        results = []
        for name, setter in ways.items():
            setter()
            start = time.perf_counter()
            results.append([r["documentId"] for r in search_(project, question)["results"]])
            times[name].append((time.perf_counter() - start) * 1000)
        same &= all(r == results[0] for r in results)
    found: dict = {name: {"p50_ms": _ms(v, 0.5), "p95_ms": _ms(v, 0.95), "n": len(v)} for name, v in times.items()}
    found["identicalResults"] = same
    return found


def run(data: Path, tokens: int, count: int) -> dict:
    conversations = locomo.load(data)
    shipped = (search.RANKER_POOL, search.LEXICAL_POOL)
    report: dict = {"haystack": tokens, "conversations": count, "poolRecall": {}}
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "a.db") as archive:
        locomo.ingest(archive, conversations)
        extra = locomo.ingest_haystack(archive, conversations, tokens)["extra"] if tokens else {}
        asked = [
            (conversation, f"locomo:{conversation['sample_id']}", qa["question"], wanted)
            for conversation in conversations[:count]
            for qa, wanted, _ in locomo.questions(conversation)
            if wanted
        ]
        evidence = sum(len(w) for *_, w in asked)

        def search_(project: str, question: str, explain: bool = False) -> dict:
            request = {"project": project, "query": question, "limit": 10, "leaseSeconds": 0}
            return archive.search({**request, "semanticPolicy": "never", "rerank": False, "explain": explain})

        named = search.NAMED_POOL
        try:
            for fetched in (0, named):
                search.NAMED_POOL = fetched
                found = {"pool": 0, "top10": 0, "distractors": 0}
                for _, project, question, wanted in asked:
                    response = search_(project, question, True)
                    top = [r["source"]["messageKey"] for r in response["results"]]
                    found["pool"] += len(wanted & {c["messageKey"] for c in response["ranking"]["pool"]})
                    found["top10"] += len(wanted & set(top))
                    found["distractors"] += sum(map(haystack.is_distractor, top))
                report.setdefault("namedFetch", {})[str(fetched)] = {
                    "poolRecall": round(found["pool"] / evidence, 3),
                    "top10Recall": round(found["top10"] / evidence, 3),
                    "distractorShareOfTop10": round(found["distractors"] / (10 * len(asked)), 3),
                }
        finally:
            search.NAMED_POOL = named
        try:
            for ranker_pool, lexical_pool in POOLS:
                search.RANKER_POOL, search.LEXICAL_POOL = ranker_pool, lexical_pool
                found = sum(
                    len(w & {c["messageKey"] for c in search_(p, q, True)["ranking"]["pool"]}) for _, p, q, w in asked
                )
                report["poolRecall"][f"{ranker_pool}/{lexical_pool}"] = round(found / evidence, 3)
        finally:
            search.RANKER_POOL, search.LEXICAL_POOL = shipped
        floor = {20: 0, 50: 0}
        tables = {c["sample_id"]: locomo.floor_table(c, extra.get(c["sample_id"], [])) for c in conversations[:count]}
        for conversation, _, question, wanted in asked:
            words = dict.fromkeys(w for w in re.findall(r"\w+", question.lower()) if w not in STOP_WORDS)
            match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
            sql = "SELECT id FROM turns WHERE turns MATCH ? ORDER BY bm25(turns) LIMIT 50"
            ids = [r[0] for r in tables[conversation["sample_id"]].execute(sql, (match,))] if words else []
            for k in floor:
                floor[k] += len(wanted & set(ids[:k]))
        report["floorTopRecall"] = {str(k): round(v / evidence, 3) for k, v in floor.items()}
        current = near_duplicates.similar
        try:
            report["nearDuplicates"] = _alternately(
                asked, search_, {"before": lambda: _set_similar(_old_similar), "after": lambda: _set_similar(current)}
            )
        finally:
            near_duplicates.similar = current
        try:
            report["namedFetchTiming"] = _alternately(
                asked, search_, {"0": lambda: _set_named(0), str(named): lambda: _set_named(named)}
            )
        finally:
            search.NAMED_POOL = named
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--haystack", type=int, default=100_000)
    parser.add_argument("--conversations", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = run(args.data, args.haystack, args.conversations)
    print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
