"""Train the shipped ranker weights (cwa/retrieve/ranker.json) on every LoCoMo conversation.

    python eval/retrieval/train_ranker.py --data ../shared/data/locomo/locomo10.json [--out PATH]
    python eval/retrieval/train_ranker.py --splits [PATH]

Admits the conversations into a temporary archive, embeds them, collects each question's pool
through the public search (`explain: true`, ordered by a ranker that knows nothing: a pool's
candidates and features do not depend on the weights) for the lexical and the hybrid model, adds the pools
of synthetic coding facts (eval/retrieval/coding.py) and of long synthetic coding histories
(eval/retrieval/long_history.py), each from its own training seed, and fits both models
(cwa/evaluation/ranker_training.py). `cwa eval locomo` reports these models only out of fold.
`--splits` trains nothing: it prints, for each model of a ranker file (the shipped one by
default), how many of its trees split on each feature.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.api import Archive
from cwa.file_writes import write_atomically
from cwa.retrieve.ranker import MODELS, NO_SPLIT
from cwa_eval.retrieval import locomo
from cwa_eval.retrieval import ranker_training as training

SHIPPED = Path(__file__).resolve().parents[2] / "cwa" / "retrieve" / "ranker.json"


def tree_splits(path: Path) -> dict[str, dict[str, int]]:
    """For each model of the ranker file at `path`, how many of its trees split on each feature
    (a node that did not split, threshold NO_SPLIT, counts for none)."""
    found = json.loads(path.read_text())
    counts = {}
    for name, model in found["models"].items():
        used = Counter()
        for features, thresholds in zip(model["feature"], model["threshold"], strict=True):
            used.update({found["features"][f] for f, t in zip(features, thresholds, strict=True) if t < NO_SPLIT})
        counts[name] = {feature: used[feature] for feature in found["features"]}
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=SHIPPED)
    parser.add_argument(
        "--splits", type=Path, nargs="?", const=SHIPPED, help="print a ranker file's splits, train nothing"
    )
    args = parser.parse_args()
    if args.splits:
        for name, used in tree_splits(args.splits).items():
            print(f"{name}: " + ", ".join(f"{feature} {count}" for feature, count in used.items()))
        return
    if not args.data.exists():
        sys.exit(f"LoCoMo data not found at {args.data}; pass --data PATH")
    conversations = locomo.load(args.data)
    with tempfile.TemporaryDirectory() as folder:
        # A pool's candidates and features do not depend on the weights that order them: every
        # archive of this process (LoCoMo's, the synthetic sets') collects its pools with a ranker
        # that knows nothing, so the shipped file never trains its successor, and a changed set of
        # FEATURES, which the shipped file no longer fits, trains as well. `rankerPath` is read
        # from the user-global file only: this process's is one in the temporary folder.
        neutral = Path(folder) / "neutral.json"
        neutral.write_bytes(training.train({name: training.Examples() for name in MODELS}, [], {}))
        config = Path(folder) / "config" / "cwa" / "config.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps({"rankerPath": str(neutral)}))
        os.environ["XDG_CONFIG_HOME"] = str(config.parents[1])
        with Archive.open(Path(folder) / "train.db") as archive:
            locomo.ingest(archive, conversations)
            archive.call("index-embed", {})
            examples = locomo.collect_examples(archive, conversations, Path(folder))
        trained_on = [*(c["sample_id"] for c in conversations), *locomo.SYNTHETIC]
        data = training.train(examples, trained_on, locomo.GROUP_WEIGHTS)
    write_atomically(args.out, data)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
