"""LoCoMo retrieval evaluation from a checkout: `python eval/locomo.py --data PATH [--json]`.

The runner lives in eval/retrieval/locomo.py (shipped as cwa_eval.retrieval.locomo, so an installed
`cwa eval locomo` runs the same code).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cwa_eval.retrieval.locomo import main

if __name__ == "__main__":
    main()
