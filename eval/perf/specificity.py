"""Preflight on a large archive with the hint gates' specificity as shipped and as plain
normalized IDF, in one process over one archive.

    python eval/perf/specificity.py [--data locomo10.json] [--haystack 100000] [--json]

Admits LoCoMo and grows every conversation's project to `--haystack` tokens with distractors
(`cwa eval locomo --haystack`'s, eval/retrieval/haystack.py), then asks every question through
preflight as `cwa eval locomo` does (age limits lifted; "Remind me: …" and as asked) twice: with
`calibration.SPECIFICITY_REFERENCE_WINDOWS` as shipped, and set past the archive's size, which
makes specificity plain normalized IDF (the gates before they had a reference size). The shipped
ranker scores both (it saw these conversations, so the figures compare the two gates, not the
ranker). Prints fire rate and precision of the snippets, plain-question hints and preflight's
latency for each.
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
from cwa.retrieve import calibration
from cwa.store.sqlfiles import queries
from cwa_eval.retrieval.locomo import DEFAULT_DATA, ingest, ingest_haystack, load, preflight_figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--haystack", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    conversations = load(args.data)
    ranker = str(importlib.resources.files("cwa.retrieve").joinpath("ranker.json"))
    shipped = calibration.SPECIFICITY_REFERENCE_WINDOWS
    report = {"haystack": args.haystack, "runs": {}}
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "specificity.db") as archive:
        ingest(archive, conversations)
        ingest_haystack(archive, conversations, args.haystack)
        windows = archive.conn.execute(queries("search")["window_count"]).fetchone()[0]
        report["windows"] = windows
        try:
            for tag, reference in (("normalizedIdf", windows + 1), ("specificity", shipped)):
                calibration.SPECIFICITY_REFERENCE_WINDOWS = reference
                found = preflight_figures(archive, conversations, [ranker, ranker], tag)
                report["runs"][tag] = {
                    "referenceWindows": reference,
                    "remind": found["remind"],
                    "plain": found["plain"],
                    "preflightP50Ms": found["preflightP50Ms"],
                    "preflightP95Ms": found["preflightP95Ms"],
                }
        finally:
            calibration.SPECIFICITY_REFERENCE_WINDOWS = shipped
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{windows:,} windows (LoCoMo grown to {args.haystack:,} tokens per conversation)")
    for tag, run in report["runs"].items():
        remind, plain = run["remind"], run["plain"]
        print(
            f"{tag:14} Remind me: fire {remind['fireRate']:.3f}, precision {remind['precision']}; plain: hints "
            f"{plain['hintRate']:.3f}, on evidence {plain['evidenceShare']}; preflight p50 / p95 "
            f"{run['preflightP50Ms']} / {run['preflightP95Ms']} ms"
        )


if __name__ == "__main__":
    main()
