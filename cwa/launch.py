"""The `cwa` command's entry point.

`cwa call METHOD` is what scripts and hooks spawn once per request, so its start-up is their
latency. Spelled exactly so (no options), it runs `cwa.call` without importing Click or the
command groups (docs/performance.md, "Cold start"); every other command line, `cwa call --help`
and `cwa --db F call METHOD` included, goes through the Click group (cwa/cli), whose `call`
runs the same function.
"""

from __future__ import annotations

import sys


def main() -> None:
    arguments = sys.argv[1:]
    if len(arguments) == 2 and arguments[0] == "call" and not arguments[1].startswith("-"):
        from cwa.archive_path import default_archive_path
        from cwa.call import call_method

        try:
            call_method(default_archive_path(), arguments[1])
        except KeyboardInterrupt:  # as Click ends an interrupted command
            print("\nAborted!", file=sys.stderr)
            sys.exit(1)
        return
    from cwa.cli import main as command_line

    command_line()
