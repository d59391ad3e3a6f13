"""How often the evidence of a LoCoMo question asking when mentions a time, against all turns.

    python eval/perf/time_mentions.py [--data locomo10.json] [--json]

The reason for the ranker's `timeMention` feature (cwa/retrieve/ranker.py): counts the questions
with readable evidence that ask when (`intent.asks_when`), how many of their evidence turns
mention a time as the feature reads one (a date, a weekday, a month, "yesterday", "last week",
"… ago"), and how many of all the conversations' turns do. Reads the data file only (no archive).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.retrieve.intent import asks_when
from cwa.retrieve.ranker import mentions_time
from cwa_eval.retrieval import locomo


def count(conversations: list[dict]) -> dict[str, int]:
    found = {"questions": 0, "askingWhen": 0, "evidenceTurns": 0, "evidenceMentioning": 0, "turns": 0, "mentioning": 0}
    for conversation in conversations:
        text = {
            locomo.normal_id(turn["dia_id"]) or turn["dia_id"]: locomo.turn_text(turn)
            for _, turn in locomo.session_turns(conversation)
        }
        found["turns"] += len(text)
        found["mentioning"] += sum(map(mentions_time, text.values()))
        for qa, wanted, _ in locomo.questions(conversation):
            evidence = [turn for turn in wanted if turn in text]
            if not evidence:
                continue
            found["questions"] += 1
            if not asks_when(qa["question"]):
                continue
            found["askingWhen"] += 1
            found["evidenceTurns"] += len(evidence)
            found["evidenceMentioning"] += sum(mentions_time(text[turn]) for turn in evidence)
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
    evidence = found["evidenceMentioning"] / found["evidenceTurns"] if found["evidenceTurns"] else 0.0
    turns = found["mentioning"] / found["turns"] if found["turns"] else 0.0
    print(
        f"{found['askingWhen']:,} of {found['questions']:,} questions ask when; "
        f"{found['evidenceMentioning']:,} of their {found['evidenceTurns']:,} evidence turns mention a time ({evidence:.0%}), "
        f"{found['mentioning']:,} of all {found['turns']:,} turns ({turns:.0%})"
    )


if __name__ == "__main__":
    main()
