"""The `cwa` command line: thin shells over the archive's methods (cwa.api), one module per
command group, each registering its commands on the root group (cwa/cli/root.py).

Human-readable output by default, `--json` for programs. Every failure a caller can cause exits
with the error code's exit status (docs/contract.md) and a one-line message, never a traceback.
The archive, the indexes and the models are imported by the commands that use them, so that
`cwa --version` and `--help` start in a fraction of the time (docs/performance.md).
"""

from cwa.cli import archive, capture, evaluation, hints, hosts, retrieval, sessions, settings, upkeep  # noqa: F401 (registration)
from cwa.cli.root import main
from cwa.exits import NEGATIVE_ANSWER_EXIT

__all__ = ["NEGATIVE_ANSWER_EXIT", "main"]
