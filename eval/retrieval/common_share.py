"""Run a `cwa` command with the embedded query's share set (docs/evaluation.md, "A lower share,
for the haystack"):

    python eval/retrieval/common_share.py SHARE eval locomo --data …/locomo10.json --haystack 100000 …

`cwa/retrieve/semantic.py` leaves out of the text the embedding model reads the words in more
than COMMON_SHARE (0.5) of the scope's windows; this sets it to SHARE for the one process, so an
evaluation (`cwa eval locomo`, `cwa eval long`) measures another share against the shipped one.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.retrieve import semantic


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    semantic.COMMON_SHARE = float(sys.argv[1])
    from cwa.launch import main as cwa_main

    sys.argv = ["cwa", *sys.argv[2:]]
    cwa_main()


if __name__ == "__main__":
    main()
