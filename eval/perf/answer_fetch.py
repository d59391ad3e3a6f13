"""What fetching a question's answer statements costs search: the fetch on and off, one process.

    python eval/perf/answer_fetch.py [--tokens 500000] [--histories 2] [--rounds 3] [--pools 10,5] [--json]

Builds `--histories` long coding histories of `--tokens` tokens (`cwa eval long --inside`'s
generator, seed 41) in a temporary archive, then times lexical search of every question with a
latest-state cue (`time_direction` 1.0: all of the `update` kind, and any other so worded), of
every other question asking how a problem was solved (`answer_words(…).anywhere`: the `fix`
kind), of every other asking what the user said they like or require (`answer_words(…).user`:
the `preference` and `instruction` kinds, as worded), and of the rest, `--rounds` times,
alternately with the answer-statement fetch (`_answer_statements` in cwa/retrieve/search.py) as
shipped and turned off (it returns nothing). Prints p50 / p95 in ms of
each, and their ratio; questions of neither cue never fetch, so theirs is the noise between the two.
With `--pools`, the fetch is timed at each of these sizes (`ANSWER_POOL`, the documents it adds to
the learned ranker's pool) in turn instead of as shipped, each against the fetch turned off.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import percentile

from cwa.api import Archive
from cwa.retrieve import search
from cwa.retrieve.intent import answer_words, time_direction
from cwa_eval.retrieval.long_history import admit_histories, history, project

KINDS = ("latest", "resolution", "stance", "other")


def _kind(question: str) -> str:
    direction = time_direction(question)
    if direction > 0:
        return "latest"
    words = answer_words(question, direction)
    if words.anywhere:
        return "resolution"
    return "stance" if words.user else "other"


def _way(name: str):
    """The fetch as `name` says: "off" returns nothing, "pool N" adds N documents, else as shipped."""
    if name == "off":
        return mock.patch.object(search, "_answer_statements", lambda *args: [])
    if name.startswith("pool "):
        return mock.patch.object(search, "ANSWER_POOL", int(name.split()[1]))
    return contextlib.nullcontext()


def run(tokens: int, histories: int, rounds: int, pools: tuple[int, ...] = ()) -> dict:
    made = [history(41 + i, tokens, 4, inside=True) for i in range(histories)]
    questions = [(index, fact.question, _kind(fact.question)) for index, h in enumerate(made) for fact in h.facts]
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "long.db") as archive:
        admit_histories(archive, made)
        ways = (*(f"pool {n}" for n in pools), "off") if pools else ("shipped", "off")
        timings: dict[str, dict[str, list[float]]] = {way: {kind: [] for kind in KINDS} for way in ways}
        for _ in range(rounds):
            for way in ways:
                with _way(way):
                    for index, question, kind in questions:
                        begin = time.perf_counter()
                        archive.search(
                            {
                                "project": project(index),
                                "query": question,
                                "limit": 10,
                                "leaseSeconds": 0,
                                "semanticPolicy": "never",
                            }
                        )
                        timings[way][kind].append((time.perf_counter() - begin) * 1000)
    report = {"tokens": tokens, "histories": histories, "rounds": rounds}
    for kind in KINDS:
        figures = {
            way: {
                "p50_ms": round(percentile(timings[way][kind], 0.5), 2),
                "p95_ms": round(percentile(timings[way][kind], 0.95), 2),
            }
            for way in timings
        }
        figures["questions"] = len(timings["off"][kind]) // rounds
        for way in ways[:-1]:
            ratio = "" if way == "shipped" else f" ({way})"  # the shipped way's keys as before --pools
            figures["p50Ratio" + ratio] = round(figures[way]["p50_ms"] / figures["off"]["p50_ms"], 3)
            figures["p95Ratio" + ratio] = round(figures[way]["p95_ms"] / figures["off"]["p95_ms"], 3)
        report[kind] = figures
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=500_000)
    parser.add_argument("--histories", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--pools", default="", help="comma-separated ANSWER_POOL sizes to time instead of the shipped one"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    pools = tuple(int(n) for n in args.pools.split(",") if n.strip())
    report = run(args.tokens, args.histories, args.rounds, pools)
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    print(f"{args.histories} histories of {args.tokens:,} tokens, {args.rounds} rounds, lexical search")
    ways = [f"pool {n}" for n in pools] or ["shipped"]
    for kind in KINDS:
        f = report[kind]
        for way in ways:
            ratio = "" if way == "shipped" else f" ({way})"
            print(
                f"  {kind:10s} ({f['questions']} questions) {way} p50 {f[way]['p50_ms']:.2f} / p95 "
                f"{f[way]['p95_ms']:.2f} ms, off {f['off']['p50_ms']:.2f} / {f['off']['p95_ms']:.2f} ms: "
                f"× {f['p50Ratio' + ratio]} / × {f['p95Ratio' + ratio]}"
            )


if __name__ == "__main__":
    main()
