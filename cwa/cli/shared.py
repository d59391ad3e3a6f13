"""Options and helpers every command group uses: --json, --project, opening the archive,
progress bars, printed command lines. Errors to exit codes and the exit status of a negative
answer are cwa/exits.py's (Click-free, for the launcher's `cwa call`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import click

from cwa import call
from cwa.config import working_project
from cwa.exits import dump_json, handles_errors

if TYPE_CHECKING:
    from cwa.api import Archive


def print_answer(result: Any, as_json: bool, show: Callable[[Any], None]) -> None:
    """JSON for programs (--json), else `show(result)` for people."""
    if as_json:
        click.echo(dump_json(result))
    else:
        show(result)


def json_option(command: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for programs.")(command)


def archive_command(group: click.Group, name: str | None = None, **settings: Any) -> Callable:
    """A command of `group` that works on the archive: it gets the click context, takes --json,
    and turns every error into its message and exit code."""

    def decorate(function: Callable) -> Callable:
        command = group.command(name, **settings)(json_option(click.pass_context(handles_errors(function))))
        command.params.sort(key=lambda param: param.name == "as_json")  # --json last in --help (stable)
        return command

    return decorate


def project_option(help_text: str = "Project identity [default: the real path of the cwd].") -> Callable:
    """`--project P`, resolved to the real path of the working directory when not given (the
    identity the CLI archives under)."""
    return click.option(
        "--project",
        help=help_text,
        callback=lambda ctx, param, value: value if value is not None else str(working_project()),
    )


def open_archive(ctx: click.Context) -> Archive:
    return call.open_archive(ctx.obj["db"])


@contextlib.contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr, fed by a `progress(done, total)` callback."""
    with click.progressbar(length=1, label=label, file=sys.stderr, show_pos=True) as bar:

        def progress(done: int, total: int) -> None:
            bar.length = total
            bar.update(done - bar.pos)

        yield progress


def run_method(
    ctx: click.Context,
    method: str,
    params: dict,
    as_json: bool,
    show: Callable[[dict], None],
    progress: str | None = None,
) -> dict:
    """Call one method and print its result: JSON with --json, else `show(result)`. With a
    `progress` label, long work draws a progress bar on stderr (not with --json)."""
    with open_archive(ctx) as archive:
        if progress and not as_json:
            with progress_bar(progress) as bar:
                archive.progress = bar
                result = archive.call(method, params)
        else:
            result = archive.call(method, params)
    print_answer(result, as_json, show)
    return result


def human_size(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return str(count)


@functools.cache
def invocation() -> list[str]:
    """How to run this cwa again from any folder: `cwa` when that is what PATH finds, else the
    absolute path of what was run (a venv's `.venv/bin/cwa`), or `python -m cwa` with this Python."""
    invoked = sys.argv[0]
    if os.path.basename(invoked) == "__main__.py":
        return [sys.executable, "-m", "cwa"]
    found = shutil.which("cwa")
    ran = invoked if os.sep in invoked else shutil.which(invoked) or invoked
    if found and os.path.realpath(found) == os.path.realpath(ran):
        return ["cwa"]
    return [os.path.abspath(ran)]


def command_line(ctx: click.Context, *args: str) -> str:
    """A command line to print for the user to type: quoted, runnable from any folder, and naming
    the archive when it is not the one a plain `cwa` would open."""
    from cwa.store.connection import default_archive_path

    archive = [] if ctx.obj["db"] == default_archive_path() else ["--db", str(ctx.obj["db"])]
    return shlex.join((*invocation(), *archive, *args))


def project_args(project: str) -> tuple[str, ...]:
    """`--project P` for a printed command, unless P is what the command would default to."""
    return () if project == str(working_project()) else ("--project", project)
