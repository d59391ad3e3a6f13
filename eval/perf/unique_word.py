"""Preflight's unique-word rule (cwa/retrieve/continuity.py) as shipped, without its length
condition, and off, in one process over one archive.

    python eval/perf/unique_word.py [--data locomo10.json] [--haystack 0] [--json]
    python eval/perf/unique_word.py --long 100000 [--seed 41] [--json]

A lexical candidate holding a word of the message no other window of the project holds, and half
of the message, is strong evidence for a snippet, in a project of at least
UNIQUE_WORD_MIN_TERMS indexed terms. Asks every question through preflight as the evaluations
do (age limits lifted; "Remind me: …" and as asked), once per variant: `shipped`; `anyLength`,
the rule in a project of any size (UNIQUE_WORD_MIN_TERMS 0); `off`, never (no word counts as
unique). Over LoCoMo (ten conversations, a project each; `--haystack TOKENS` grows each with
`cwa eval locomo --haystack`'s distractors) scored by the shipped ranker (it saw these
conversations: the figures compare the rule, not the ranker), or with `--long TOKENS` over eight
of `cwa eval long --inside`'s histories of that size from `--seed`. Prints the projects' indexed
terms (fewest, most), and each variant's "Remind me" fire rate and precision and its
plain-question hints.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.resources
import json
import sys
import tempfile
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.api import Archive
from cwa.retrieve import preflight
from cwa_eval.retrieval import locomo, long_recall
from cwa_eval.retrieval.long_history import admit_histories, history

VARIANTS = {
    "shipped": {},
    "anyLength": {"UNIQUE_WORD_MIN_TERMS": 0},
    "off": {"UNIQUE_WORD_IDF": 2.0},  # above any specificity
}


def figures(archive: Archive, ask, tag: str) -> dict:
    """`ask(archive, tag)`'s preflight figures under each variant."""
    found = {}
    for name, values in VARIANTS.items():
        with mock.patch.multiple(preflight, **values) if values else contextlib.nullcontext():
            result = ask(archive, f"{tag}-{name}")
        found[name] = {"remind": result["remind"], "plain": result["plain"]}
    return found


PROJECT_TERMS = """
SELECT min(terms), max(terms) FROM (
  SELECT sum(w.term_count) AS terms FROM windows AS w JOIN documents AS d ON d.id = w.document_row
  GROUP BY d.project_id
)"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--haystack", type=int, default=0, help="LoCoMo: tokens per project (0: LoCoMo alone)")
    parser.add_argument("--long", type=int, default=0, help="long histories of this many tokens instead of LoCoMo")
    parser.add_argument("--seed", type=int, default=41, help="with --long: history i uses seed + i")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "unique.db") as archive:
        if args.long:
            made = [history(args.seed + i, args.long, 4, inside=True) for i in range(8)]
            admit_histories(archive, made)
            report = figures(archive, lambda a, tag: long_recall.preflight_figures(a, made, tag), "long")
        else:
            conversations = locomo.load(args.data)
            locomo.ingest(archive, conversations)
            if args.haystack:
                locomo.ingest_haystack(archive, conversations, args.haystack)
            ranker = str(importlib.resources.files("cwa.retrieve").joinpath("ranker.json"))
            report = figures(
                archive, lambda a, tag: locomo.preflight_figures(a, conversations, [ranker, ranker], tag), "locomo"
            )
        low, high = archive.conn.execute(PROJECT_TERMS).fetchone()
    report = {"projectTermsMin": low, "projectTermsMax": high, "variants": report}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"indexed terms a project: {low:,} to {high:,}")
    for name, found in report["variants"].items():
        print(f"{name:10} {locomo.preflight_summary(found, digits=4)}")


if __name__ == "__main__":
    main()
