"""Commands that write or read documents by id: init, status, admit, get, supersede, pin,
unpin, checkpoint, catalog, redact.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cwa import limits
from cwa.cli.formatters import (
    print_document,
    print_lifecycle,
    print_status,
)
from cwa.cli.root import main
from cwa.cli.shared import (
    archive_command,
    command_line,
    open_archive,
    project_option,
    run_method,
)
from cwa.errors import CwaError, Internal, InvalidRequest
from cwa.exits import dump_json
from cwa.input_files import read_file, read_stream

if TYPE_CHECKING:
    from cwa.api import Archive


@archive_command(main)
def init(ctx: click.Context, as_json: bool) -> None:
    """Create the archive (or bring its schema up to date) and say where it is."""
    with open_archive(ctx) as archive:
        status = archive.status()
    if as_json:
        click.echo(dump_json({"path": status["path"], "schemaVersion": status["schemaVersion"]}))
    else:
        click.echo(f"archive ready: {status['path']} (schema {status['schemaVersion']})")


@archive_command(main)
@click.option("--project", help="Count only this project's documents.")
@click.option(
    "--archive",
    "lifecycle",
    is_flag=True,
    help="Also: documents per retention class and state, where the bytes are, expiries, pins, leases.",
)
def status(ctx: click.Context, project: str | None, lifecycle: bool, as_json: bool) -> None:
    """Path, schema version, counts and bytes of the archive."""
    params: dict[str, Any] = {"project": project} if project else {}
    if lifecycle:
        params["archive"] = True

    def show(result: dict[str, Any]) -> None:
        print_status(result)
        if lifecycle:
            print_lifecycle(result["archive"])

    run_method(ctx, "status", params, as_json, show)


def _read_requests(source: Path | None) -> list[tuple[int, Any]]:
    """One JSON object, or JSON lines of them: [(line number, parsed request)]."""
    from cwa.json_input import parse_json_body

    body = (
        read_file(source, limits.MAX_REQUEST_BYTES)
        if source
        else read_stream(sys.stdin.buffer, limits.MAX_REQUEST_BYTES, "the input")
    )
    # each request goes through the contract, which bounds its nesting (bounded=False: once)
    try:
        return [(1, parse_json_body(body, "input", bounded=False))]
    except InvalidRequest:
        lines = body.splitlines()
        if len(lines) < 2:
            raise
    return [
        (number, parse_json_body(line, f"line {number}", bounded=False))
        for number, line in enumerate(lines, 1)
        if line.strip()
    ]


@archive_command(main, "admit")
@click.option(
    "--file",
    "source",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A JSON admit request, or JSON lines of them [default: stdin].",
)
@project_option("Project identity [default: the request's, else the real path of the cwd].")
def admit_command(ctx: click.Context, source: Path | None, project: str | None, as_json: bool) -> None:
    """Archive documents from an admit request (see docs/contract.md).

    Admission is idempotent: re-running the same input stores nothing new. JSON lines are
    admitted in order as `cwa import` archives a history: each document's exact bytes first, in
    batches of one transaction, and indexed meanwhile, a helper process sharing the work (each
    result is then that of a queued admission: `generation` null, `indexPending`); all are
    indexed when it ends. The first failure stops the run, naming its line, once every earlier
    line is archived and indexed.

    \b
    Example:
      echo '{"sessionId":"s1","kind":"turn","messages":[{"role":"user","text":"hi"}]}' \\
        | cwa admit
    """
    requests = _read_requests(source)
    explicit = ctx.get_parameter_source("project") is click.core.ParameterSource.COMMANDLINE

    def with_project(request: Any) -> Any:
        return (
            {**request, "project": project}
            if isinstance(request, dict) and (explicit or "project" not in request)
            else request
        )

    shown = len(requests) > 1 and not as_json and sys.stderr.isatty()
    with open_archive(ctx) as archive:
        if len(requests) == 1:
            results = [archive.admit(with_project(requests[0][1]))]
        else:
            try:
                with (
                    click.progressbar(requests, label="admitting", file=sys.stderr, show_pos=True)
                    if shown
                    else contextlib.nullcontext(requests) as items
                ):
                    results = archive.admit_many(with_project(request) for _, request in items)
            except CwaError as error:
                position = error.details.pop("request", None)
                if position is not None:  # a line's failure, not the archive's
                    error.details["line"] = requests[position][0]
                    error.message = f"line {error.details['line']}: {error.message}"
                raise
    if as_json:
        click.echo(dump_json(results[0] if len(results) == 1 else results))
        return
    for result in results:
        state = "new" if result["created"] else "already archived"
        click.echo(f"{result['documentId']} v{result['version']} ({state})")


def _parse_range(text: str | None) -> dict[str, int] | None:
    if text is None:
        return None
    try:
        start, end = (int(part) for part in text.split(":", 1))
    except ValueError as exc:
        raise InvalidRequest("--range must be START:END byte offsets", field="range") from exc
    return {"start": start, "end": end}


@archive_command(main, "get")
@click.argument("document_id")
@click.option("--version", "version", type=int, help="A specific version [default: the latest].")
@click.option("--range", "byte_range", metavar="START:END", help="Only bytes START..END of the text.")
@click.option("--text", "raw_text", is_flag=True, help="Write the exact text to stdout, any size.")
def get_command(
    ctx: click.Context,
    document_id: str,
    version: int | None,
    byte_range: str | None,
    raw_text: bool,
    as_json: bool,
) -> None:
    """Read an archived document by id: its text, messages and chunk manifest."""
    params: dict[str, Any] = {"documentId": document_id}
    if version is not None:
        params["version"] = version
    if byte_range is not None:
        params["range"] = _parse_range(byte_range)
    with open_archive(ctx) as archive:
        if raw_text:
            _write_text(archive, params)
            return
        result = archive.get(params)
    if as_json:
        click.echo(dump_json(result))
    elif "range" in result:
        click.echo(result["text"])
    else:
        print_document(result)


def _write_text(archive: Archive, params: dict[str, Any]) -> None:
    """Stream the exact text in bounded range reads, so a document of any size prints whole."""
    if "range" in params:
        sys.stdout.buffer.write(archive.get(params)["text"].encode("utf-8"))
        return
    first = archive.get(params)
    if first.get("complete"):  # small enough to have come whole (a checkpoint root: its original)
        sys.stdout.buffer.write(first["text"].encode("utf-8"))
        return
    if isinstance(first.get("checkpoint"), dict):  # a large archived input: its parts, in order
        import blake3

        digest = blake3.blake3()
        for part in first["checkpoint"]["parts"]:
            for data in _ranges(archive, part, part["start"], part["end"]):
                digest.update(data)
                sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        if digest.hexdigest() != first["checkpoint"]["blake3"]:
            raise Internal("the reassembled input does not match its blake3 digest", reason="digest-mismatch")
        return
    for data in _ranges(archive, first, 0, first["byteLength"]):
        sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _ranges(archive: Archive, document: dict[str, Any], start: int, end: int) -> Iterator[bytes]:
    """A document's bytes [start, end) in bounded range reads (each widened to character edges)."""
    fixed = {"documentId": document["documentId"], "version": document["version"]}
    while start < end:
        stop = min(end, start + limits.GET_MAX_RANGE_BYTES - 4)  # room to widen to a character edge
        piece = archive.get({**fixed, "range": {"start": start, "end": stop}})
        yield piece["text"].encode("utf-8")
        start = piece["range"]["end"]


@archive_command(main, "supersede")
@click.argument("document_id")
@click.option("--by", "replacement", required=True, help="The document that replaces it.")
def supersede_command(ctx, document_id, replacement, as_json) -> None:
    """Retire DOCUMENT_ID in favour of another document of the same project."""
    run_method(
        ctx,
        "supersede",
        {"documentId": document_id, "by": {"documentId": replacement}},
        as_json,
        lambda result: click.echo(
            f"{result['documentId']} v{result['version']} superseded by "
            f"{result['replacement']['documentId']} v{result['replacement']['version']}"
        ),
    )


def _pin_command(method: str, summary: str) -> None:
    """Register `cwa pin` or `cwa unpin` (the same shape, one method each)."""

    @archive_command(main, method, help=summary)
    @click.argument("document_id")
    @click.option("--version", type=click.IntRange(1, limits.MAX_VERSION), help="Which version [default: the latest].")
    def command(ctx, document_id, version, as_json) -> None:
        params: dict[str, Any] = {"documentId": document_id}
        if version is not None:
            params["version"] = version
        run_method(
            ctx,
            method,
            params,
            as_json,
            lambda result: click.echo(
                f"{result['documentId']} v{result['version']} "
                + ("pinned: it never expires" if result["pinned"] else "unpinned: its retention class applies again")
            ),
        )


_pin_command("pin", "Keep a document version from expiring until it is unpinned (redaction still removes it).")


_pin_command("unpin", "Let a pinned version expire again, on its retention class's schedule.")


@archive_command(
    main,
    "checkpoint",
    help=(
        "Archive a large input exactly, in parts, and print the preview that may stand in for it in a "
        f"prompt (head and tail within {limits.CHECKPOINT_PREVIEW_TOKENS:,} tokens) and its catalog entry. Idempotent: running it "
        "again archives nothing new and prints the same ids. `cwa get ROOT_ID --text` returns the text."
    ),
)
@click.option(
    "--file",
    "source",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="The oversized input to archive (UTF-8).",
)
@click.option("--session", "session_id", default="cli", show_default=True, help="The session it belongs to.")
@project_option()
@click.option("--created-at", help="When it was written (ISO-8601) [default: now].")
def checkpoint_command(ctx, source, session_id, project, created_at, as_json) -> None:
    try:
        text = read_file(source, limits.MAX_REQUEST_BYTES).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"{source} is not UTF-8 text", field="file", reason="not-utf8") from exc
    params: dict[str, Any] = {"project": project, "sessionId": session_id, "text": text}
    if created_at:
        params["createdAt"] = created_at

    def show(result: dict[str, Any]) -> None:
        entry = result["catalogEntry"]
        click.echo(
            f"{'archived' if result['created'] else 'already archived'}: {result['rootId']} "
            f"({entry['bytes']} bytes in {len(result['partIds'])} part(s), blake3 {entry['blake3'][:16]})"
        )
        click.echo(f"preview ({result['previewTokens']} tokens):\n{result['preview']}")

    run_method(ctx, "checkpoint", params, as_json, show, progress="archiving")


@archive_command(
    main,
    "catalog",
    help=(
        "The session's checkpoint catalog: one line per archived input (id, topic, terms, bytes, hash), "
        f"newest first, within {limits.CHECKPOINT_CATALOG_TOKENS:,} tokens, under a header signed by this archive."
    ),
)
@click.option("--session", "session_id", required=True, help="The session whose checkpoints to list.")
@project_option()
def catalog_command(ctx, session_id, project, as_json) -> None:
    run_method(
        ctx,
        "catalog",
        {"project": project, "sessionId": session_id},
        as_json,
        lambda result: click.echo(result["text"]),
    )


@archive_command(main, "redact")
@project_option()
@click.option("--session", "session_id", help="Only this session of the project [default: the whole project].")
@click.option("--confirm", help="The token printed by a first run without it.")
def redact_command(ctx, project, session_id, confirm, as_json) -> None:
    """Remove a session's (or a whole project's) documents: run once to see how many and get a
    confirm token, then again with --confirm TOKEN. They leave search, preflight and recall at
    once, pins and leases notwithstanding; `cwa maintain` then purges their bytes. Pi's own
    session files are never touched."""
    params: dict[str, Any] = {"project": project}
    if session_id:
        params["sessionId"] = session_id
    if confirm:
        params["confirm"] = confirm
    where = f"session {session_id} of {project}" if session_id else f"project {project}"

    def show(result: dict[str, Any]) -> None:
        if confirm:
            click.echo(f"redacted {result['redacted']} document(s) of {where}; run `cwa maintain` to purge their bytes")
            return
        go_ahead = command_line(
            ctx,
            "redact",
            "--project",
            project,
            *(("--session", session_id) if session_id else ()),
            "--confirm",
            result["confirm"],
        )
        click.echo(f"{result['documents']} document(s) in {where} would be redacted.\nTo go ahead: {go_ahead}")

    run_method(ctx, "redact", params, as_json, show)
