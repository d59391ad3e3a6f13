"""Train the shipped ranker weights (cwa/retrieve/ranker.json) on every LoCoMo conversation.

    python eval/retrieval/train_ranker.py --data ../shared/data/locomo/locomo10.json [--out PATH]

Admits the conversations into a temporary archive, embeds them, collects each question's pool
through the public search (`explain: true`) for the lexical and the hybrid model, adds the pools
of synthetic coding facts (eval/retrieval/coding.py) and of long synthetic coding histories
(eval/retrieval/long_history.py), each from its own training seed, and fits both models
(cwa/evaluation/ranker_training.py). `cwa eval locomo` reports these models only out of fold.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.api import Archive
from cwa.file_writes import write_atomically
from cwa_eval.retrieval import locomo
from cwa_eval.retrieval import ranker_training as training

SHIPPED = Path(__file__).resolve().parents[2] / "cwa" / "retrieve" / "ranker.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=SHIPPED)
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(f"LoCoMo data not found at {args.data}; pass --data PATH")
    conversations = locomo.load(args.data)
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "train.db") as archive:
        locomo.ingest(archive, conversations)
        archive.call("index-embed", {})
        examples = locomo.collect_examples(archive, conversations, Path(folder))
        trained_on = [*(c["sample_id"] for c in conversations), *locomo.SYNTHETIC]
        data = training.train(examples, trained_on, locomo.GROUP_WEIGHTS)
    write_atomically(args.out, data)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
