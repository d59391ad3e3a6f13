"""How a command ends: an error as its message (or JSON) and its exit status, a negative answer.

Click-free, so that `cwa call` can run without loading the command line (cwa/launch.py); the
command groups use the same functions through cwa/cli/shared.py.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import orjson

from cwa.errors import CwaError, Internal

# The command worked and its answer is "no" (a recall that did not resolve, a failed quality
# gate), as grep exits 1 for no match; errors keep their own codes (cwa/errors.py).
NEGATIVE_ANSWER_EXIT = 1


def dump_json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def fail(error: CwaError, as_json: bool) -> NoReturn:
    if as_json:
        print(dump_json({"error": error.to_json()}), flush=True)
    else:
        print(f"cwa: {error.code}: {error.message}", file=sys.stderr, flush=True)
    sys.exit(error.exit_code)


def handles_errors(command: Callable | None = None, *, always_json: bool = False) -> Callable:
    """Turn a CwaError into its message and exit code (JSON on stdout with --json, or always)."""

    def decorate(command: Callable) -> Callable:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            as_json = always_json or bool(kwargs.get("as_json"))
            try:
                return command(*args, **kwargs)
            except CwaError as error:
                fail(error, as_json)
            except BrokenPipeError:  # the reader went away (`cwa … | head`): not an error of ours
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                sys.exit(0)
            except Exception as exc:  # a bug: say so in one line (CWA_DEBUG=1 shows the traceback)
                if os.environ.get("CWA_DEBUG"):
                    raise
                fail(Internal(f"{type(exc).__name__}: {exc} (set CWA_DEBUG=1 for details)"), as_json)

        return wrapper

    return decorate(command) if command is not None else decorate


def negative_answer() -> NoReturn:
    """End a command that worked and whose answer is "no" (NEGATIVE_ANSWER_EXIT)."""
    sys.exit(NEGATIVE_ANSWER_EXIT)
