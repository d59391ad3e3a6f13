"""Options and helpers every command group uses: errors to exit codes, --json, --project,
opening the archive, progress bars, and the one exit status for a negative answer.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
import orjson

from cwa import config
from cwa.errors import CwaError, Internal

if TYPE_CHECKING:
    from cwa.api import Archive


# The command worked and its answer is "no" (a recall that did not resolve, a failed quality
# gate), as grep exits 1 for no match; errors keep their own codes (cwa/errors.py).
NEGATIVE_ANSWER_EXIT = 1


def dump_json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def fail(error: CwaError, as_json: bool) -> NoReturn:
    if as_json:
        click.echo(dump_json({"error": error.to_json()}))
    else:
        click.echo(f"cwa: {error.code}: {error.message}", err=True)
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


def print_answer(result: Any, as_json: bool, show: Callable[[Any], None]) -> None:
    """JSON for programs (--json), else `show(result)` for people."""
    if as_json:
        click.echo(dump_json(result))
    else:
        show(result)


def negative_answer() -> NoReturn:
    """End a command that worked and whose answer is "no" (NEGATIVE_ANSWER_EXIT)."""
    sys.exit(NEGATIVE_ANSWER_EXIT)


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


def project_dir() -> Path:
    return Path(os.path.realpath(os.getcwd()))


def project_option(help_text: str = "Project identity [default: the real path of the cwd].") -> Callable:
    """`--project P`, resolved to the real path of the working directory when not given (the
    identity the CLI archives under)."""
    return click.option(
        "--project",
        help=help_text,
        callback=lambda ctx, param, value: value if value is not None else str(project_dir()),
    )


def open_archive(ctx: click.Context) -> Archive:
    from cwa.api import Archive

    settings = config.load_settings(project_dir())
    return Archive.open(ctx.obj["db"], settings=settings)


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
    return () if project == str(project_dir()) else ("--project", project)
