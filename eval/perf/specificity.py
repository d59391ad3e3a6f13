"""Preflight on a multi-project archive with the hint gates' specificity as shipped, with the
archive's counts instead of the project's, and as plain normalized IDF, in one process over one
archive.

    python eval/perf/specificity.py [--data locomo10.json] [--haystack 100000] [--rounds 2] [--json]

Admits LoCoMo (ten conversations, a project each) and, with `--haystack` (0: none), grows every
conversation's project to that many tokens with distractors (`cwa eval locomo --haystack`'s,
eval/retrieval/haystack.py), then asks every question through preflight as `cwa eval locomo`
does (age limits lifted; "Remind me: …" and as asked), once per variant and round:
`specificity`, as shipped (counts within the project's window range, `scope_frequencies`);
`archiveCounts`, the same gates fed the whole archive's counts (every project's: the rule before
it); and `normalizedIdf`, archive counts with `calibration.SPECIFICITY_REFERENCE_WINDOWS` set past
the archive's size (the gates before they had a reference size). The shipped ranker scores all
(it saw these conversations, so the figures compare the gates, not the ranker). Prints fire rate
and precision of the snippets (also at other `snippetMinShare` values), plain-question hints and
preflight's latency (of the last round) for each.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.api import Archive
from cwa.retrieve import calibration, context, preflight
from cwa.store.sqlfiles import queries
from cwa_eval.retrieval.locomo import (
    DEFAULT_DATA,
    ingest,
    ingest_haystack,
    load,
    preflight_figures,
    preflight_summary,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--haystack", type=int, default=100_000, help="tokens per project (0: LoCoMo alone)")
    parser.add_argument("--rounds", type=int, default=2, help="each variant this many times, alternately")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    conversations = load(args.data)
    ranker = str(importlib.resources.files("cwa.retrieve").joinpath("ranker.json"))
    shipped = calibration.SPECIFICITY_REFERENCE_WINDOWS
    report = {"haystack": args.haystack, "runs": {}}
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "specificity.db") as archive:
        ingest(archive, conversations)
        if args.haystack:
            ingest_haystack(archive, conversations, args.haystack)
        windows = archive.conn.execute(queries("search")["window_count"]).fetchone()[0]
        report["windows"] = windows
        # preflight counts a hit's terms itself, and its gates through context.specific_in_scope
        scoped = (preflight.scope_frequencies, context.scope_frequencies, context.scope_windows)
        archive_wide = (lambda ctx, words, cap=None: context.frequencies(ctx, words),) * 2 + (
            lambda ctx: context.frequencies(ctx, [])[1],
        )
        variants = (  # tag, reference size, (counts, the windows they are counted among)
            ("normalizedIdf", windows + 1, archive_wide),
            ("archiveCounts", shipped, archive_wide),
            ("specificity", shipped, scoped),
        )
        try:
            for round_ in range(args.rounds):
                for tag, reference, counts in variants:
                    calibration.SPECIFICITY_REFERENCE_WINDOWS = reference
                    preflight.scope_frequencies, context.scope_frequencies, context.scope_windows = counts
                    found = preflight_figures(archive, conversations, [ranker, ranker], f"{tag}-{round_}")
                    report["runs"][tag] = {
                        "referenceWindows": reference,
                        "remind": found["remind"],
                        "remindByShare": found["remindByShare"],
                        "plain": found["plain"],
                        "preflightP50Ms": found["preflightP50Ms"],
                        "preflightP95Ms": found["preflightP95Ms"],
                    }
        finally:
            calibration.SPECIFICITY_REFERENCE_WINDOWS = shipped
            preflight.scope_frequencies, context.scope_frequencies, context.scope_windows = scoped
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{windows:,} windows (LoCoMo grown to {args.haystack:,} tokens per conversation)")
    for tag, run in report["runs"].items():
        print(
            f"{tag:14} {preflight_summary(run)}; preflight p50 / p95 {run['preflightP50Ms']} / {run['preflightP95Ms']} ms"
        )


if __name__ == "__main__":
    main()
