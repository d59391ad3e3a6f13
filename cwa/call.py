"""`cwa call METHOD`: one contract method in a fresh process, JSON in on stdin and out on stdout.

Scripts spawn it once per request, so the launcher (cwa/launch.py) runs it without the
command line; Click's `cwa call` (cwa/cli/hosts.py) runs the same function.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from cwa import config, limits
from cwa.exits import handles_errors

if TYPE_CHECKING:
    from cwa.api import Archive


def open_archive(db: Path) -> Archive:
    """The archive file `db`, with the settings that apply in the working directory's project."""
    from cwa.api import Archive

    return Archive.open(db, settings=config.load_settings(config.working_project()))


@handles_errors(always_json=True)
def call_method(db: Path, method: str) -> None:
    """Run one contract method: JSON params on stdin, the JSON result on stdout, a failure as the
    JSON error and its exit status."""
    from cwa.api import method_named
    from cwa.input_files import read_stream
    from cwa.json_input import parse_json_body
    from cwa.protocol_output import claimed_stdout

    method_named(method)  # an unknown method fails before stdin is read
    # the contract bounds the params' nesting (bounded=False: checked once)
    params = parse_json_body(read_stream(sys.stdin.buffer, limits.MAX_REQUEST_BYTES, "params"), "params", bounded=False)
    # the answer alone on stdout (a failure's JSON is printed there once this has given it back)
    with claimed_stdout() as out, open_archive(db) as archive:
        result = archive.call(method, params)
        # answered before the archive closes: closing may still archive a long history (catch-up)
        out.write(orjson.dumps(result) + b"\n")
        out.flush()
