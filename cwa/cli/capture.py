"""Other agents' sessions: `cwa import` (the past), `cwa hook` (what a client's hook runs) and
`cwa hooks install|uninstall` (the hooks in each client's configuration). docs/capture.md."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import click
import orjson

from cwa import limits
from cwa.cli.root import main
from cwa.cli.shared import json_option, open_archive
from cwa.config import working_project
from cwa.errors import CwaError, InvalidRequest, UnsupportedFormat
from cwa.exits import dump_json, handles_errors
from cwa.input_files import read_stream
from cwa.vocabulary import CAPTURE_HOSTS, HOOK_HOSTS

MEBIBYTE = 1 << 20


def _since(value: str | None) -> str | None:
    from cwa.timestamps import parse_timestamp

    if value is None:
        return None
    try:
        return parse_timestamp(value)
    except ValueError as exc:
        raise InvalidRequest(f"--since {value!r} is not a date: {exc}", field="since", reason="bad-timestamp") from exc


@main.command("import")
@click.argument("host", type=click.Choice(CAPTURE_HOSTS))
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--since", help="Only sessions active on or after this date (ISO-8601, e.g. 2026-11-01).")
@click.option("--project", help="Archive every session under this project [default: each session's own cwd].")
@click.option("--dry-run", is_flag=True, help="Read and count; archive nothing.")
@json_option
@click.pass_context
@handles_errors
def import_command(
    ctx: click.Context,
    host: str,
    paths: tuple[Path, ...],
    since: str | None,
    project: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Archive the past sessions of HOST (claude, codex, opencode, pi) from its own store, or from PATHS.

    \b
    Default stores: claude ~/.claude/projects ($CLAUDE_CONFIG_DIR), codex ~/.codex/sessions
    ($CODEX_HOME), opencode ~/.local/share/opencode/opencode.db ($XDG_DATA_HOME), pi
    ~/.pi/agent/sessions ($PI_CODING_AGENT_DIR). Each session is archived under its working
    directory's real path, with its id, lineage and timestamps. A re-run reads only what changed
    and archives only new turns; a line still being written waits for the next run. What cannot
    be read is named (file and line, exit 13: unsupported-format); the rest is imported. Turns are
    archived first, in batches, and indexed between batches and at the end, a helper process
    sharing the work (`indexed`); an import stopped before then leaves what it archived queued,
    for the next import or serve to index.
    """
    from cwa.capture import importer
    from cwa.index.queue_worker import IndexAtEnd, QueueIndexer
    from cwa.store.connection import BULK_SECONDS

    started = time.monotonic()
    units = importer.sources(host, list(paths), dict(os.environ))
    total = sum(u.size for u in units)
    shown = not as_json and sys.stderr.isatty()
    with open_archive(ctx) as archive:
        # Archived first, indexed at the end with a helper process (cwa/index/queue_worker.py): a
        # failure before then leaves the rest queued, for the next import or serve to index.
        # A helper prepares what each committed batch queued while the next is archived, and
        # this process writes its rows between batches (QueueIndexer).
        archive.index_worker = None if dry_run else IndexAtEnd()
        indexer = None if dry_run else QueueIndexer(archive.conn, str(archive.path), archive.handlers, archive.clock)
        committed = (lambda: indexer.step(BULK_SECONDS)) if indexer is not None else None
        options = {"since": _since(since), "project": project, "dry_run": dry_run, "committed": committed}
        try:
            if not shown:
                summary = importer.import_sources(archive, host, units, **options)
            else:
                label = f"{host}: {len(units)} source(s), {total / MEBIBYTE:.1f} MiB"
                with click.progressbar(length=max(total, 1), label=label, file=sys.stderr) as bar:
                    summary = importer.import_sources(archive, host, units, progress=bar.update, **options)
        except BaseException:
            if indexer is not None:
                indexer.preparer.close()
            raise
        finally:
            archive.index_worker = None
        archived = time.monotonic()
        indexed = 0 if indexer is None else _index_imported(indexer, shown)
        index_seconds = time.monotonic() - archived
        kept = importer.keep_common_terms(archive, summary)
    result = {
        **summary.to_json(),
        "indexed": indexed,
        "indexSeconds": round(index_seconds, 3),
        "termCountsKept": kept,
        "seconds": round(time.monotonic() - started, 3),
    }
    if as_json:
        click.echo(dump_json(result))
    else:
        verb = "would archive" if dry_run else "archived"
        click.echo(
            f"{host}: {result['sources']} source(s), {result['unchanged']} unchanged, {result['read']} read "
            f"({result['bytes'] / MEBIBYTE:.1f} MiB); {result['sessions']} session(s), {result['messages']} message(s); "
            f"{verb} {result['documents']} turn document(s)"
            + (f"; {result['olderThanSince']} session(s) before --since" if result["olderThanSince"] else "")
        )
        for problem in result["problems"]:
            where = f"{problem['file']}:{problem['line']}" if problem["line"] else problem["file"]
            click.echo(f"cwa: unsupported-format: {where}: {problem['reason']}: {problem['detail']}", err=True)
    if result["problems"]:
        sys.exit(UnsupportedFormat.exit_code)


def _index_imported(indexer: Any, shown: bool) -> int:
    """Index what the import left queued (and anything queued before it); how many documents the
    import indexed in all. A progress bar on a terminal."""
    from cwa.store import index_queue

    queued = index_queue.lag(indexer.conn, indexer.clock())["documents"]
    if not shown or not queued:
        return indexer.finish()
    with click.progressbar(length=queued, label="indexing", file=sys.stderr) as bar:
        start = indexer.done
        return indexer.finish(lambda done, _total: bar.update(done - start - bar.pos))


@main.command("hook")
@click.argument("host", type=click.Choice(HOOK_HOSTS))
@click.argument("payload", required=False)
@click.pass_context
def hook_command(ctx: click.Context, host: str, payload: str | None) -> None:
    """Answer one client hook event in this process: the event as JSON on stdin (or, for Codex's
    notify program, as PAYLOAD); prints the client's answer (a hint as additional context) or
    nothing. The installed hooks run the lighter hook client, which hands events to a hook server
    instead (docs/capture.md). Never fails the client: a failure is logged beside the archive and
    shown by `cwa doctor`; the exit status is 0."""
    from cwa.capture import hooks

    db = Path(ctx.obj["db"])
    try:
        raw = (
            payload.encode()
            if payload is not None
            else read_stream(sys.stdin.buffer, limits.MAX_REQUEST_BYTES, "hook input")
        )
        event = orjson.loads(raw)
        if not isinstance(event, dict):
            raise InvalidRequest("the hook input is not a JSON object", reason="not-an-object")
    except (CwaError, orjson.JSONDecodeError) as exc:
        hooks.log_failure(db, host, None, exc)
        sys.exit(0)
    with contextlib.ExitStack() as opened:  # the archive is opened only if the event needs it
        answer = hooks.answer_safely(lambda: opened.enter_context(open_archive(ctx)), db, host, event, dict(os.environ))
    if answer is not None:
        sys.stdout.buffer.write(orjson.dumps(answer) + b"\n")
    sys.exit(0)


@main.command("hook-server", hidden=True)
@click.option("--socket", "socket_path", required=True, type=click.Path(path_type=Path))
@click.option("--idle", type=click.FloatRange(1), default=None, help="Seconds without an event before it exits.")
@click.pass_context
def hook_server_command(ctx: click.Context, socket_path: Path, idle: float | None) -> None:
    """The archive's hook server (started by the hook client; docs/capture.md)."""
    from cwa.capture import hook_server

    kwargs = {"idle_seconds": idle} if idle is not None else {}
    sys.exit(hook_server.serve(Path(ctx.obj["db"]), socket_path, lambda: open_archive(ctx), **kwargs))


@main.group("hooks")
def hooks_group() -> None:
    """Capture and hints in Claude Code, Codex and OpenCode (docs/capture.md)."""


def _hooks_command(name: str, summary: str) -> None:
    @hooks_group.command(name, help=summary)
    @click.argument("host", type=click.Choice(HOOK_HOSTS))
    @click.option("--project", "in_project", is_flag=True, help="This project's configuration [default: the user's].")
    @click.option("--write", is_flag=True, help="Change the configuration (without it: print what would change).")
    @json_option
    @click.pass_context
    @handles_errors
    def command(ctx: click.Context, host: str, in_project: bool, write: bool, as_json: bool) -> None:
        from cwa.integrations import hook_config

        result = getattr(hook_config, name)(
            host, working_project() if in_project else None, dict(os.environ), Path(ctx.obj["db"]), write
        )
        if as_json:
            click.echo(dump_json(result))
            return
        for change in result["changes"]:
            verb = ("changed" if write else "would change") if change["changed"] else "unchanged"
            click.echo(f"{verb}: {change['file']}")
            if change["changed"] and not write:
                click.echo(change["content"].rstrip("\n"))
        for note in result["notes"]:
            click.echo(note)
        if not write and any(c["changed"] for c in result["changes"]):
            click.echo(f"# run again with --write to {name}")


_hooks_command("install", "Install cwa's capture and hints in HOST (claude, codex, opencode).")
_hooks_command("uninstall", "Remove cwa's hooks from HOST's configuration (everything else is kept).")
