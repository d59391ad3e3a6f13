"""How often a LoCoMo question's evidence is spoken by the person the question names.

    python eval/perf/speakers.py [--data locomo10.json] [--json]

The reason for the ranker's `speakerFit` feature (cwa/retrieve/ranker.py): counts the questions
with readable evidence, those naming exactly one of their conversation's two speakers (as a
whole word), and of those questions' evidence turns, how many that speaker says. Reads the data
file only (no archive).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa_eval.retrieval import locomo


def count(conversations: list[dict]) -> dict[str, int]:
    found = {"questions": 0, "namingOne": 0, "evidenceTurns": 0, "spokenByNamed": 0}
    for conversation in conversations:
        dialog = conversation["conversation"]
        people = (dialog["speaker_a"], dialog["speaker_b"])
        speaker = {
            locomo.normal_id(turn["dia_id"]) or turn["dia_id"]: turn["speaker"]
            for _, turn in locomo.session_turns(conversation)
        }
        for qa, wanted, _ in locomo.questions(conversation):
            evidence = [turn for turn in wanted if turn in speaker]
            if not evidence:
                continue
            found["questions"] += 1
            named = [p for p in people if re.search(rf"\b{re.escape(p)}\b", qa["question"])]
            if len(named) != 1:
                continue
            found["namingOne"] += 1
            found["evidenceTurns"] += len(evidence)
            found["spokenByNamed"] += sum(speaker[turn] == named[0] for turn in evidence)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found = count(locomo.load(args.data))
    if args.json:
        print(json.dumps(found))
        return
    share = found["spokenByNamed"] / found["evidenceTurns"] if found["evidenceTurns"] else 0.0
    print(
        f"{found['namingOne']:,} of {found['questions']:,} questions name one speaker; "
        f"{found['spokenByNamed']:,} of their {found['evidenceTurns']:,} evidence turns are that speaker's ({share:.0%})"
    )


if __name__ == "__main__":
    main()
