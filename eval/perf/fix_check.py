"""What checking that a hint's source states a fix costs preflight: the check on and off, one process.

    python eval/perf/fix_check.py [--tokens 100000] [--histories 8] [--rounds 3] [--json]

Asked how a problem was solved or what caused it (intent.asks_for_fix), preflight shows a snippet
only if its source states a fix (continuity.decide's `unanswered-fix`), which means reading the
source's conversation for a fix's words (`_states_fix` in cwa/retrieve/preflight.py). Builds
`--histories` long coding histories of `--tokens` tokens (`cwa eval long --inside`'s generator,
seed 41) in a temporary archive, then decides preflight for every question with that cue, asked
as `cwa eval long` asks it ("Remind me: …", age limits lifted), as a new message of a new session
each time (nothing frozen or cooled down), `--rounds` times,
alternately with the check as shipped and turned off (no message asks for a fix). Prints p50 /
p95 in ms of each, their ratio, and the outcomes each way.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from unittest import mock

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import latency

from cwa.api import Archive
from cwa.retrieve import preflight
from cwa.retrieve.intent import asks_for_fix
from cwa_eval.retrieval.locomo import REMIND, without_age_limits
from cwa_eval.retrieval.long_history import admit_histories, history, project

WAYS = ("shipped", "off")


def _way(name: str):
    """ "off": preflight sees no fix cue in any message; "shipped": as it is."""
    if name == "off":
        return mock.patch.object(preflight, "asks_for_fix", lambda message: False)
    return contextlib.nullcontext()


def run(tokens: int, histories: int, rounds: int) -> dict:
    made = [history(41 + i, tokens, 4, inside=True) for i in range(histories)]
    questions = [
        (index, fact.question) for index, h in enumerate(made) for fact in h.facts if asks_for_fix(fact.question)
    ]
    timings: dict[str, list[float]] = {way: [] for way in WAYS}
    reasons: dict[str, Counter] = {way: Counter() for way in WAYS}
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "long.db") as archive:
        archive.settings = without_age_limits(archive.settings)
        admit_histories(archive, made)
        for round_number in range(rounds):
            for way in WAYS:
                with _way(way):
                    for number, (index, question) in enumerate(questions):
                        key = f"{way}-{round_number}-{number}"
                        begin = time.perf_counter()
                        result = archive.call(
                            "preflight",
                            {
                                "project": project(index),
                                "sessionId": f"bench-{key}",
                                "messageKey": key,
                                "text": REMIND + question,
                            },
                        )
                        timings[way].append((time.perf_counter() - begin) * 1000)
                        if round_number == 0:
                            reasons[way][result["diagnostics"]["reason"]] += 1
    summary: dict = {"tokens": tokens, "histories": histories, "questions": len(questions), "rounds": rounds}
    for way in WAYS:
        summary[way] = {**latency(timings[way]), "reasons": dict(reasons[way].most_common())}
    summary["p50_ratio"] = round(summary["shipped"]["p50_ms"] / summary["off"]["p50_ms"], 2)
    summary["p95_ratio"] = round(summary["shipped"]["p95_ms"] / summary["off"]["p95_ms"], 2)
    return summary


def show(result: dict) -> None:
    print(
        f"{result['questions']} questions asking for a fix, {result['histories']} histories of {result['tokens']:,} tokens"
    )
    for way in WAYS:
        row = result[way]
        print(f"  {way:<8} p50 {row['p50_ms']:8.2f} ms   p95 {row['p95_ms']:8.2f} ms   n={row['n']}   {row['reasons']}")
    print(f"  shipped / off: p50 x {result['p50_ratio']}, p95 x {result['p95_ratio']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--histories", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.tokens, args.histories, args.rounds)
    if args.json:
        print(orjson.dumps(result).decode())
    else:
        show(result)


if __name__ == "__main__":
    main()
