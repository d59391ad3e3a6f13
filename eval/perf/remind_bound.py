"""What bounds preflight's "Remind me" snippets in a long history: its gates, or search's top result?

    python eval/perf/remind_bound.py [--tokens 100000] [--seed 41] [--histories 8] [--json]

Over `cwa eval long --inside`'s histories of that size (a project each, the shipped ranker, age
limits lifted as the evaluations lift them), asks every question prefixed "Remind me: " twice:
through preflight, and through lexical search (`explain`), whose first result is what a snippet
could at best show. Reports preflight's snippets (how many, how many on an evidence message), and
for the questions it showed none, by its reason: how many, how often search's first result is an
evidence message anyway, how often any of its top 10 is; then, for those suppressed questions,
how many the learned ranker gives its first result a probability of at least each threshold and
how many of those are right. `searchTopRight`, the share of all questions whose first search
result is evidence, bounds what any gate can reach: a snippet rate r at precision p needs
r·p ≤ searchTopRight (a snippet shows one source, the top one or another below it).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path

from cwa.api import Archive
from cwa_eval.retrieval.locomo import MODES, REMIND, source_keys, without_age_limits
from cwa_eval.retrieval.long_history import admit_histories, history, project

THRESHOLDS = (0.2, 0.3, 0.4, 0.5)
FACTS_PER_KIND = 4  # as `cwa eval long` plants by default
SNIPPET = "historical-snippet"


def run(tokens: int, seed: int, histories: int) -> dict:
    made = [history(seed + i, tokens, FACTS_PER_KIND, True) for i in range(histories)]
    asked = []
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "long.db") as archive:
        admit_histories(archive, made)
        archive.settings = without_age_limits(archive.settings)
        key_of = source_keys(archive)
        for index, made_history in enumerate(made):
            for number, fact in enumerate(made_history.facts):
                text = REMIND + fact.question
                request = {"project": project(index), "sessionId": f"bound-{number}", "messageKey": "m", "text": text}
                answer = archive.call("preflight", request)
                hints = [h for h in answer["hints"] if h["type"] == SNIPPET]
                found = archive.search(
                    {"project": project(index), "query": text, "limit": 10, "leaseSeconds": 0, "explain": True}
                    | MODES["lexical"]
                )
                ranked = [r["source"]["messageKey"] for r in found["results"]]
                # the first result's probability: an exact hit above the ranked tier has none
                probability = {c["messageKey"]: c["probability"] for c in found["ranking"]["pool"]}
                asked.append(
                    {
                        "reason": answer["diagnostics"]["reason"],
                        "snippet": key_of(hints[0]["source"]["documentId"]) in fact.evidence if hints else None,
                        "topRight": bool(ranked) and ranked[0] in fact.evidence,
                        "anyRight": any(k in fact.evidence for k in ranked),
                        "topProbability": probability.get(ranked[0], 0.0) if ranked else 0.0,
                    }
                )
    return _report(asked, tokens, seed, histories)


def _report(asked: list[dict], tokens: int, seed: int, histories: int) -> dict:
    shown = [a for a in asked if a["snippet"] is not None]
    silent = [a for a in asked if a["snippet"] is None]
    by_reason: dict[str, Counter] = {}
    for a in silent:
        counts = by_reason.setdefault(a["reason"], Counter())
        counts.update(questions=1, searchTopRight=a["topRight"], searchAnyTop10Right=a["anyRight"])
    return {
        "tokens": tokens,
        "seed": seed,
        "histories": histories,
        "questions": len(asked),
        "searchTopRight": round(sum(a["topRight"] for a in asked) / len(asked), 4),
        "snippets": {"shown": len(shown), "right": sum(a["snippet"] for a in shown)},
        "suppressed": {reason: dict(c) for reason, c in sorted(by_reason.items(), key=lambda r: -r[1]["questions"])},
        "suppressedByTopProbability": {
            str(t): {
                "questions": sum(a["topProbability"] >= t for a in silent),
                "searchTopRight": sum(a["topProbability"] >= t and a["topRight"] for a in silent),
            }
            for t in THRESHOLDS
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--histories", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = run(args.tokens, args.seed, args.histories)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{report['questions']} questions at {args.tokens:,} tokens: search's first result is evidence for "
        f"{report['searchTopRight']:.3f}; preflight showed {report['snippets']['shown']} snippets, "
        f"{report['snippets']['right']} on evidence"
    )
    for reason, counts in report["suppressed"].items():
        print(
            f"  {reason}: {counts['questions']} (search's first right {counts.get('searchTopRight', 0)}, "
            f"any of its top 10 {counts.get('searchAnyTop10Right', 0)})"
        )
    for threshold, counts in report["suppressedByTopProbability"].items():
        print(
            f"  suppressed, first result's probability ≥ {threshold}: {counts['questions']}, "
            f"{counts['searchTopRight']} right"
        )


if __name__ == "__main__":
    main()
