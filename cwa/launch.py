"""The `cwa` command's entry point.

`cwa call METHOD` is what scripts spawn once per request, so its start-up is their latency.
Spelled so, or `cwa --db FILE call METHOD`, it runs `cwa.call` without importing Click or the
command groups (docs/performance.md, "Cold start"); every other command line (`cwa call --help`,
a `--db` that names a folder, which Click refuses) goes through the Click group (cwa/cli), whose
`call` runs the same function.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _one_call(arguments: list[str]) -> tuple[Path | None, str] | None:
    """(the --db file or None, the method) of `[--db FILE] call METHOD`; None for anything else."""
    db = None
    if arguments[:1] == ["--db"] and len(arguments) == 4:
        db, arguments = arguments[1], arguments[2:]
    elif arguments[:1] and arguments[0].startswith("--db=") and len(arguments) == 3:
        db, arguments = arguments[0].removeprefix("--db="), arguments[1:]
    if len(arguments) != 2 or arguments[0] != "call" or arguments[1].startswith("-"):
        return None
    if db is not None and os.path.isdir(db):
        return None  # Click says why it is refused
    return (Path(db) if db is not None else None), arguments[1]


def _closed_streams_to_null() -> None:
    """A process started with stdin or stderr closed (a daemon's habit) gets the null device there:
    every read and message meets a stream (a message printed to a missing stderr would go to
    stdout), and no file the process opens takes descriptor 0 or 2. A closed stdout is left to
    the commands, which say so (cwa/protocol_output.py)."""
    for number, name, mode in ((0, "stdin", "r"), (2, "stderr", "w")):
        if getattr(sys, name) is None:
            null = os.open(os.devnull, os.O_RDONLY if mode == "r" else os.O_WRONLY)
            if null != number:
                os.dup2(null, number)
                os.close(null)
            setattr(sys, name, open(number, mode, closefd=False))  # noqa: SIM115 (for the process's life)


def main() -> None:
    _closed_streams_to_null()
    one_call = _one_call(sys.argv[1:])
    if one_call is not None:
        from cwa.archive_path import default_archive_path
        from cwa.call import call_method

        db, method = one_call
        try:
            call_method(db if db is not None else default_archive_path(), method)
        except KeyboardInterrupt:  # as Click ends an interrupted command
            print("\nAborted!", file=sys.stderr)
            sys.exit(1)
        return
    from cwa.cli import main as command_line

    command_line()
