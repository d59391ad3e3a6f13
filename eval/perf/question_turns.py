"""Where LoCoMo's wrong "Remind me" snippets come from, and what the ranker's reading of the
turns before its candidates costs (docs/evaluation.md, "A turn that asks, and the reply after it",
"A reply found with the question it answers").

    python eval/perf/question_turns.py [--data locomo10.json] [--conversations 4] [--snippets-only] [--json]

Reads the data in place into a temporary archive. Two figures, the shipped ranker (it saw these
conversations: the figures describe where errors lie, not how well it generalizes):
- `snippets`: each question of the first conversations, prefixed "Remind me: ", through preflight
  (age limits lifted, as the evaluations do); each snippet shown counted as `right` (its source is
  an evidence turn), `adjacent` (within two turns of one, in its session), `sameSession` or
  `otherSession`;
- `cost`: every question of all ten conversations searched lexically twice, alternating per
  question between the ranker as shipped and with its reading of the documents before its
  candidates (`ranker._before`: which end asking a question, which query terms they hold) turned
  off (`asksQuestion` and `followsQuestion` then 0, `exchangeCoverage` the candidate's own):
  search p50 / p95 of each, in this process. Not with `--snippets-only` (which also runs on a
  tree from before the features, to compare).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.api import Archive
from cwa.retrieve import ranker
from cwa_eval.retrieval import locomo


def _place(source: str, wanted: set[str]) -> str:
    """Where a snippet's source turn lies against the question's evidence turns."""
    if source in wanted:
        return "right"
    session, number = source.split(":")
    near = [int(t.split(":")[1]) for t in wanted if locomo.session_of(t) == session]
    if any(abs(n - int(number)) <= 2 for n in near):
        return "adjacent"
    return "sameSession" if near else "otherSession"


def snippets(archive: Archive, conversations: list[dict]) -> dict[str, int]:
    base = archive.settings
    archive.settings = locomo.without_age_limits(base)
    found: Counter = Counter()
    key_of = locomo.source_keys(archive)
    try:
        for conversation in conversations:
            project = f"locomo:{conversation['sample_id']}"
            for number, (qa, wanted, _) in enumerate(locomo.questions(conversation)):
                if not wanted:
                    continue
                request = {"project": project, "sessionId": f"q{number}", "messageKey": "m"}
                hints = archive.call("preflight", {**request, "text": locomo.REMIND + qa["question"]})["hints"]
                for hint in hints:
                    if hint["type"] == "historical-snippet":
                        found[_place(key_of(hint["source"]["documentId"]), wanted)] += 1
    finally:
        archive.settings = base
    return dict(found)


def cost(archive: Archive, conversations: list[dict]) -> dict[str, dict[str, float]]:
    asked = [
        (f"locomo:{c['sample_id']}", qa["question"])
        for c in conversations
        for qa, wanted, _ in locomo.questions(c)
        if wanted
    ]
    times: dict[str, list[float]] = {"shipped": [], "withoutBefore": []}
    for project, question in asked * 2:
        for name in times:
            request = {"project": project, "query": question, "limit": 10, "leaseSeconds": 0, "semanticPolicy": "never"}
            with (
                mock.patch.object(ranker, "_before", lambda *_: ranker.Before(set(), {}))
                if name != "shipped"
                else contextlib.nullcontext()
            ):
                begun = time.perf_counter()
                archive.search(request)
                times[name].append((time.perf_counter() - begun) * 1000)
    return {name: _percentiles(values) for name, values in times.items()}


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(ordered[len(ordered) // 2], 2),
        "p95_ms": round(ordered[int(len(ordered) * 0.95)], 2),
        "n": len(ordered),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=4)
    parser.add_argument("--snippets-only", action="store_true", help="count the snippets, time nothing")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    conversations = locomo.load(args.data)
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "a.db") as archive:
        locomo.ingest(archive, conversations)
        report = {"snippets": snippets(archive, conversations[: args.conversations])}
        if not args.snippets_only:
            report["cost"] = cost(archive, conversations)
    if args.json:
        print(json.dumps(report))
        return
    print("Remind me snippets:", ", ".join(f"{k} {v}" for k, v in report["snippets"].items()))
    for name, found in report.get("cost", {}).items():
        print(f"{name:18s} p50 {found['p50_ms']} ms  p95 {found['p95_ms']} ms  ({found['n']} searches)")


if __name__ == "__main__":
    main()
