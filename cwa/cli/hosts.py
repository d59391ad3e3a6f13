"""Agent hosts: `cwa call` and `cwa serve` (the JSON contract), MCP, the browse page, Pi."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import click

from cwa import limits
from cwa.call import call_method
from cwa.cli.root import main
from cwa.cli.shared import json_option, open_archive
from cwa.config import working_project
from cwa.errors import Internal
from cwa.exits import dump_json, handles_errors
from cwa.vocabulary import MCP_CLIENTS


class _CallCommand(click.Command):
    """`cwa call`, whose help lists the archive's methods: read from cwa.api only when shown."""

    @property
    def help(self) -> str:
        from cwa.api import METHODS

        return (
            "Run one serve method: JSON params on stdin, JSON result on stdout.\n\n"
            'On failure the JSON error {"error": {"code", "message", "details"}} is printed on stdout and '
            "the exit status names the code (docs/contract.md).\n\n\b\nMethods:\n"
            + "\n".join(f"  {name:<17}{method.summary}" for name, method in sorted(METHODS.items()))
            + '\n\n\b\nExample:\n  echo \'{"documentId": "doc-1a2b3c"}\' | cwa call get'
        )

    @help.setter
    def help(self, _value: str | None) -> None:
        pass  # the property above is the help


@main.command(cls=_CallCommand, short_help="Run one serve method: JSON params on stdin, JSON result on stdout.")
@click.argument("method", metavar="METHOD")
@click.pass_context
def call(ctx: click.Context, method: str) -> None:
    call_method(ctx.obj["db"], method)


@main.command()
@click.option(
    "--background/--no-background", default=True, show_default=True, help="Embed queued windows while serving."
)
@click.option(
    "--maintenance-interval",
    type=click.FloatRange(0),
    default=limits.MAINTENANCE_INTERVAL_SECONDS,
    show_default=True,
    help="Seconds between bounded maintenance passes while serving (0: none).",
)
@click.pass_context
@handles_errors
def serve(ctx: click.Context, background: bool, maintenance_interval: float) -> None:
    """Serve methods as JSON lines on stdin/stdout until end of input.

    \b
    Each line {"id", "method", "params"} is answered by one line, {"id", "result"} or
    {"id", "error": {"code", "message", "details"}}. Methods: see docs/contract.md.
    What session-context archives is durable when it answers; a child process indexes it soon
    after (a search indexes what still waits in its project first; `cwa status` shows the queue).
    Meanwhile, queued windows are embedded in small background batches (--no-background: not),
    and every --maintenance-interval seconds one bounded maintenance pass runs (as `cwa maintain`).
    """
    from cwa.protocol_output import claimed_stdout
    from cwa.serve import serve_archive

    try:
        with claimed_stdout() as replies:  # what else writes to stdout goes where stderr goes
            code = serve_archive(
                lambda: open_archive(ctx),
                sys.stdin.buffer,
                replies,
                background=background,
                maintenance_interval=maintenance_interval,
            )
        sys.exit(code)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(Internal.exit_code)


@main.group("mcp", invoke_without_command=True)
@click.pass_context
@handles_errors
def mcp_group(ctx: click.Context) -> None:
    """Serve the archive's agent tools over MCP on stdin/stdout.

    \b
    Project: $CWA_PROJECT, else the real path of the working directory.
    Session: $CWA_SESSION, else one id per server process.
    cwa mcp install claude|codex|opencode [--scope user] [--write]   # the client's entry (docs/mcp.md)
    """
    if ctx.invoked_subcommand is not None:
        return
    from cwa.mcp_server import serve_stdio

    sys.exit(serve_stdio(lambda: open_archive(ctx), os.environ))


@mcp_group.command("install")
@click.argument("client", type=click.Choice(MCP_CLIENTS))
@click.option(
    "--scope",
    type=click.Choice(("project", "user")),
    default="project",
    show_default=True,
    help="claude only: user (~/.claude.json, no approval) or project (./.mcp.json, approved once in Claude Code).",
)
@click.option("--write", is_flag=True, help="Merge the entry into the client's configuration file (idempotent).")
@json_option
@click.pass_context
@handles_errors
def mcp_install(ctx: click.Context, client: str, scope: str, write: bool, as_json: bool) -> None:
    """Print the configuration entry that starts `cwa mcp` in CLIENT, or merge it with --write:
    claude → ./.mcp.json (or ~/.claude.json with --scope user), codex → ~/.codex/config.toml,
    opencode → ./opencode.json. The entry names the archive (--db) unless it is the built-in
    default; the entry's other keys (env, timeouts) are kept."""
    from cwa.integrations.mcp_clients import install

    result = install(client, working_project(), os.environ, write, db=Path(ctx.obj["db"]), scope=scope)
    if as_json:
        click.echo(dump_json(result))
        return
    if not write:
        click.echo(f"# add to {result['config']} (or run again with --write):")
        click.echo(result["entry"].rstrip("\n"))
        return
    click.echo(f"{'updated' if result['written'] else 'already up to date:'} {result['config']}")


@main.command("browse")
@click.option("--port", type=click.IntRange(1, 65535), default=8001, show_default=True, help="Port on 127.0.0.1.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a browser.")
@click.pass_context
@handles_errors
def browse(ctx: click.Context, port: int, open_browser: bool) -> None:
    """Look at the archive in a browser, read-only (Datasette; pip install 'cwa[browse]').

    A search page first (cwa's own search, the exact text of each hit), sessions with their
    rotations and externalized outputs, each hint beside its message with its reason, the archive
    at a glance; the raw tables and SQL under /archive. Bound to 127.0.0.1 only. Stop it with
    Ctrl-C. See docs/browse.md.
    """
    from cwa.browse import serve

    sys.exit(serve(Path(ctx.obj["db"]), port, open_browser))


@main.group("pi")
def pi_group() -> None:
    """The Pi extension (docs/pi.md): where it is, and its entry in Pi's settings."""


@pi_group.command("path")
def pi_path() -> None:
    """Print the absolute path of the extension shipped with this installation."""
    from cwa.integrations.pi_settings import extension_path

    click.echo(str(extension_path()))


def _pi_settings_command(name: str, summary: str) -> Callable:
    @pi_group.command(name, help=summary)
    @click.option(
        "--project",
        "in_project",
        is_flag=True,
        help="Edit this project's .pi/settings.json [default: Pi's user settings].",
    )
    @json_option
    @handles_errors
    def command(in_project: bool, as_json: bool) -> None:
        from cwa.integrations import pi_settings

        result = getattr(pi_settings, name)(working_project() if in_project else None, os.environ)
        if as_json:
            click.echo(dump_json(result))
            return
        verb = (
            ("added to" if result["installed"] else "removed from")
            if result["changed"]
            else ("already in" if result["installed"] else "not in")
        )
        click.echo(f"{result['extension']} {verb} {result['settings']}")
        if result["installed"] and result["changed"]:
            click.echo("Start pi as usual; /window shows cwa's status.")

    return command


_pi_settings_command("install", "Add the extension to Pi's settings `extensions` list (idempotent).")


_pi_settings_command("uninstall", "Remove the extension from Pi's settings `extensions` list.")
