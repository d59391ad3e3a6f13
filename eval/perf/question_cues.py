"""How often a LoCoMo question's evidence carries what the question's wording points at.

    python eval/perf/question_cues.py [--data locomo10.json] [--json]

The reasons for two of the ranker's features (cwa/retrieve/ranker.py):
- `speakerFit`: of the questions with readable evidence, those naming exactly one of their
  conversation's two speakers (as the feature reads a name: `intent.names`, `speakers_named`), and of those questions' evidence turns, how many
  that speaker says;
- `timeMention`: the questions asking when (`intent.asks_when`), how many of their evidence turns
  mention a time as the feature reads one (a date, a weekday, a month, a time of day,
  "yesterday", "last week", "… ago"), and how many of all the conversations' turns do.
Reads the data file only (no archive).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.retrieve.intent import asks_when, names
from cwa.retrieve.ranker import mentions_time, speakers_named
from cwa_eval.retrieval import locomo


def count(conversations: list[dict]) -> dict[str, int]:
    found = dict.fromkeys(
        ("questions", "namingOne", "namedEvidence", "spokenByNamed", "askingWhen", "whenEvidence", "whenMentioning"), 0
    )
    found |= {"turns": 0, "mentioning": 0}
    for conversation in conversations:
        dialog = conversation["conversation"]
        people = (dialog["speaker_a"], dialog["speaker_b"])
        turns = {
            locomo.normal_id(turn["dia_id"]) or turn["dia_id"]: turn for _, turn in locomo.session_turns(conversation)
        }
        text = {key: locomo.turn_text(turn) for key, turn in turns.items()}
        found["turns"] += len(turns)
        found["mentioning"] += sum(map(mentions_time, text.values()))
        for qa, wanted, _ in locomo.questions(conversation):
            evidence = [turn for turn in wanted if turn in turns]
            if not evidence:
                continue
            found["questions"] += 1
            named = speakers_named(names(qa["question"]), people)
            if len(named) == 1:
                found["namingOne"] += 1
                found["namedEvidence"] += len(evidence)
                found["spokenByNamed"] += sum(turns[turn]["speaker"] in named for turn in evidence)
            if asks_when(qa["question"]):
                found["askingWhen"] += 1
                found["whenEvidence"] += len(evidence)
                found["whenMentioning"] += sum(mentions_time(text[turn]) for turn in evidence)
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

    def share(part: str, whole: str) -> str:
        return f"{found[part] / found[whole]:.0%}" if found[whole] else "-"

    print(
        f"{found['namingOne']:,} of {found['questions']:,} questions name one speaker; {found['spokenByNamed']:,} "
        f"of their {found['namedEvidence']:,} evidence turns are that speaker's ({share('spokenByNamed', 'namedEvidence')})"
    )
    print(
        f"{found['askingWhen']:,} of {found['questions']:,} questions ask when; {found['whenMentioning']:,} of their "
        f"{found['whenEvidence']:,} evidence turns mention a time ({share('whenMentioning', 'whenEvidence')}), "
        f"{found['mentioning']:,} of all {found['turns']:,} turns ({share('mentioning', 'turns')})"
    )


if __name__ == "__main__":
    main()
