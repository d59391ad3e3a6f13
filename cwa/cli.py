"""The `cwa` command line: thin shells over the archive's methods (cwa.api).

Human-readable output by default, `--json` for programs. Every failure a caller can cause exits
with the error code's exit status (docs/contract.md) and a one-line message, never a traceback.
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
from typing import TYPE_CHECKING, Any

import click
import orjson

from cwa import __version__, config, limits
from cwa.errors import ArchiveCorrupt, CwaError, Internal, InvalidRequest
from cwa.file_writes import write_atomically
from cwa.input_files import read_file, read_stream
from cwa.timestamps import utc_now
from cwa.vocabulary import RELATIONS, SCOPES

if TYPE_CHECKING:
    from cwa.api import Archive

# The archive, the indexes and the models are imported by the commands that use them, so that
# `cwa --version` and `--help` start in a fraction of the time (docs/performance.md).


# The command worked and its answer is "no" (a recall that did not resolve, a failed quality
# gate), as grep exits 1 for no match; errors keep their own codes (cwa/errors.py).
NEGATIVE_ANSWER_EXIT = 1


def _dump(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def _fail(error: CwaError, as_json: bool) -> None:
    if as_json:
        click.echo(_dump({"error": error.to_json()}))
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
                _fail(error, as_json)
            except BrokenPipeError:  # the reader went away (`cwa … | head`): not an error of ours
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                sys.exit(0)
            except Exception as exc:  # a bug: say so in one line (CWA_DEBUG=1 shows the traceback)
                if os.environ.get("CWA_DEBUG"):
                    raise
                _fail(Internal(f"{type(exc).__name__}: {exc} (set CWA_DEBUG=1 for details)"), as_json)

        return wrapper

    return decorate(command) if command is not None else decorate


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


def _project_dir() -> Path:
    return Path(os.path.realpath(os.getcwd()))


def project_option(help_text: str = "Project identity [default: the real path of the cwd].") -> Callable:
    """`--project P`, resolved to the real path of the working directory when not given (the
    identity the CLI archives under)."""
    return click.option(
        "--project",
        help=help_text,
        callback=lambda ctx, param, value: value if value is not None else str(_project_dir()),
    )


def _open(ctx: click.Context) -> Archive:
    from cwa.api import Archive

    settings = config.load_settings(_project_dir())
    return Archive.open(ctx.obj["db"], settings=settings)


@contextlib.contextmanager
def _progress_bar(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr, fed by a `progress(done, total)` callback."""
    with click.progressbar(length=1, label=label, file=sys.stderr, show_pos=True) as bar:

        def progress(done: int, total: int) -> None:
            bar.length = total
            bar.update(done - bar.pos)

        yield progress


def _run(
    ctx: click.Context,
    method: str,
    params: dict,
    as_json: bool,
    show: Callable[[dict], None],
    progress: str | None = None,
) -> dict:
    """Call one method and print its result: JSON with --json, else `show(result)`. With a
    `progress` label, long work draws a progress bar on stderr (not with --json)."""
    with _open(ctx) as archive:
        if progress and not as_json:
            with _progress_bar(progress) as bar:
                archive.progress = bar
                result = archive.call(method, params)
        else:
            result = archive.call(method, params)
    click.echo(_dump(result)) if as_json else show(result)
    return result


def _size(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return str(count)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cwa")
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Archive file [default: $CWA_DB or ~/.local/share/cwa/archive.db].",
)
@click.pass_context
def main(ctx: click.Context, db: Path | None) -> None:
    """cwa keeps what leaves an agent's context window in one local SQLite file.

    \b
    Examples:
      cwa demo                      archive a sample session and show it
      cwa status                    what the archive holds
      cwa admit --file turn.json    archive one document (or JSON lines of them)
      cwa get doc-1a2b3c --text     print a document's exact text
      echo '{}' | cwa call status   any serve method, JSON in and out
    """
    ctx.ensure_object(dict)
    from cwa.store.connection import default_archive_path

    ctx.obj["db"] = db if db is not None else default_archive_path()


@archive_command(main)
def init(ctx: click.Context, as_json: bool) -> None:
    """Create the archive (or bring its schema up to date) and say where it is."""
    with _open(ctx) as archive:
        status = archive.status()
    if as_json:
        click.echo(_dump({"path": status["path"], "schemaVersion": status["schemaVersion"]}))
    else:
        click.echo(f"archive ready: {status['path']} (schema {status['schemaVersion']})")


def _print_status(status: dict[str, Any]) -> None:
    docs = status["documents"]
    states = ", ".join(f"{k} {v}" for k, v in docs["byState"].items()) or "none"
    kinds = ", ".join(f"{k} {v}" for k, v in docs["byKind"].items()) or "none"
    size = status["bytes"]
    click.echo(f"archive    {status['path']} (schema {status['schemaVersion']})")
    if status["project"]:
        click.echo(f"project    {status['project']}")
    click.echo(f"documents  {docs['total']} ({states}); kinds: {kinds}")
    click.echo(
        f"contents   {status['projects']} project(s), {status['sessions']} session(s), "
        f"{status['messages']} message(s), {status['chunks']} chunk(s)"
    )
    click.echo(
        f"bytes      logical {_size(size['logical'])}, chunks {_size(size['chunks'])}, "
        f"file {_size(size['file'])}, free {_size(size['free'])}, wal {_size(size['wal'])}"
    )


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
        _print_status(result)
        if lifecycle:
            _print_lifecycle(result["archive"])

    _run(ctx, "status", params, as_json, show)


def _print_lifecycle(found: dict[str, Any]) -> None:
    for retention_class, states in sorted(found["byClass"].items()):
        shown = ", ".join(f"{state} {v['documents']} ({_size(v['bytes'])})" for state, v in sorted(states.items()))
        click.echo(f"  {retention_class:<12} {shown}")
    size = found["bytes"]
    click.echo(
        f"  bytes      logical {_size(size['logical'])}, chunks {_size(size['chunks'])}, index "
        f"{_size(size['index'])}, vectors {_size(size['vectors'])}, other {_size(size['other'])}, "
        f"free {_size(size['free'])} (auto_vacuum {found['autoVacuum']})"
    )
    click.echo(
        f"  expiry     {found['dueExpirations']} due now, next {found['nextExpiry'] or 'none'}; "
        f"{found['purgePending']} awaiting purge"
    )
    click.echo(
        f"  protection {found['pinned']} pinned, {found['activeLeases']} active lease(s) over "
        f"{found['leasedDocuments']} document(s), {found['contextProtections']} context protection(s)"
    )


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

    Admission is idempotent: re-running the same input stores nothing new. With JSON lines,
    documents are admitted in order and the first failure stops the run, naming its line.

    \b
    Example:
      echo '{"sessionId":"s1","kind":"turn","messages":[{"role":"user","text":"hi"}]}' \\
        | cwa admit
    """
    requests = _read_requests(source)
    explicit = ctx.get_parameter_source("project") is click.core.ParameterSource.COMMANDLINE
    results = []
    with (
        _open(ctx) as archive,
        click.progressbar(requests, label="admitting", file=sys.stderr, show_pos=True)
        if len(requests) > 1 and not as_json
        else _plain(requests) as items,
    ):
        for number, request in items:
            if isinstance(request, dict) and (explicit or "project" not in request):
                request = {**request, "project": project}
            try:
                results.append(archive.admit(request))
            except CwaError as error:
                if len(requests) > 1:
                    error.details["line"] = number
                    error.message = f"line {number}: {error.message}"
                raise
    if as_json:
        click.echo(_dump(results[0] if len(results) == 1 else results))
        return
    for result in results:
        state = "new" if result["created"] else "already archived"
        click.echo(f"{result['documentId']} v{result['version']} ({state})")


class _plain:
    """A stand-in for click.progressbar when no bar is wanted."""

    def __init__(self, items: list) -> None:
        self.items = items

    def __enter__(self) -> list:
        return self.items

    def __exit__(self, *exc_info: object) -> None:
        return None


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
    with _open(ctx) as archive:
        if raw_text:
            _write_text(archive, params)
            return
        result = archive.get(params)
    if as_json:
        click.echo(_dump(result))
    elif "range" in result:
        click.echo(result["text"])
    else:
        _print_document(result)


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


def _print_document(doc: dict[str, Any]) -> None:
    click.echo(f"{doc['documentId']} v{doc['version']}  {doc['kind']}  {doc['state']}")
    click.echo(f"project  {doc['project']}")
    click.echo(
        f"session  {doc['sessionId']}" + (f" (parent {doc['parentSessionId']})" if doc["parentSessionId"] else "")
    )
    click.echo(f"created  {doc['createdAt']}   class {doc['retentionClass']}   {doc['byteLength']} bytes")
    click.echo(f"blake3   {doc['textDigest']}")
    manifest = doc["manifest"]
    click.echo(f"chunks   {manifest.get('chunkCount', len(manifest['chunks']))}")
    click.echo("messages")
    for m in doc["messages"]:
        click.echo(f"  {m['key']:<36} {m['role']:<12} bytes {m['start']}..{m['end']}")
    if doc["complete"]:
        from cwa.retrieve import render

        click.echo("")
        click.echo(render.document_text(doc))
    else:
        click.echo(f"\n(text not shown: {doc['byteLength']} bytes; use --text or --range START:END)")


def _print_results(response: dict[str, Any]) -> None:
    if response["requestedScope"] != response["scope"]:
        click.echo(
            f"scope {response['requestedScope']} is capped at {response['scope']} by maxReadScope; to widen it, set "
            f'"maxReadScope": "{response["requestedScope"]}" in {config.user_config_path(os.environ)} '
            "(only that file can: repository settings may not widen what they can read)"
        )
    resolution = response.get("resolution")
    if resolution:
        click.echo(f"{resolution['relation']}: {resolution['status']}")
    from cwa.retrieve import render

    click.echo(render.search_results(response, utc_now(), for_model=False))


@archive_command(main, "search")
@click.argument("words", nargs=-1)
@click.option(
    "--relation",
    type=click.Choice(tuple(RELATIONS)),
    help="Find the latest question, request, correction, answer or decision.",
)
@click.option(
    "--scope",
    type=click.Choice(SCOPES),
    default="project",
    show_default=True,
    help="Where to look (all: every project, if the user-global maxReadScope allows it).",
)
@project_option()
@click.option("--session", "session_id", help="Current session id (needed for --scope session).")
@click.option(
    "--limit",
    type=click.IntRange(1, limits.MAX_SEARCH_LIMIT),
    help=f"Results [default: searchResults, {config.BY_KEY['searchResults'].default}].",
)
def search_command(ctx, words, relation, scope, project, session_id, limit, as_json) -> None:
    """Find archived messages by identifier, structure or keywords.

    Exact identifiers (paths, symbols, commits, error codes, quoted phrases) rank above the
    latest question/request/correction/answer/decision, which rank above BM25 keyword hits.

    \b
    Examples:
      cwa search src/retry.py
      cwa search '"exponential backoff"'
      cwa search --relation latest-correction backoff
    """
    query = " ".join(words) or None
    params: dict[str, Any] = {"scope": scope, "project": project}
    for key, value in (("query", query), ("relation", relation), ("sessionId", session_id), ("limit", limit)):
        if value is not None:
            params[key] = value
    found = _run(ctx, "search", params, as_json, _print_results)
    if not found["results"] and not as_json and scope == "project":
        _hint_other_projects(ctx, project)


def _hint_other_projects(ctx: click.Context, project: str) -> None:
    """Nothing found in this folder's project: say which projects do hold documents."""
    with _open(ctx) as archive:
        held = archive.status({})["projectsHeld"]
    others = [p for p in held if p["project"] != project]
    if others and not any(p["project"] == project for p in held):
        listed = ", ".join(f"{p['project']} ({p['documents']})" for p in others[:5])
        click.echo(
            f"(project {project} holds no documents; the archive holds {listed}"
            f"{' …' if len(others) > 5 else ''}: search one with --project NAME)",
            err=True,
        )


@archive_command(main, "recall")
@click.argument("target")
@project_option("Project the recall is made in [default: the real path of the cwd].")
@click.option(
    "--neighbors",
    type=click.IntRange(0, limits.MAX_RECALL_NEIGHBORS),
    help=f"Windows on each side to include [default: {limits.DEFAULT_RECALL_NEIGHBORS}].",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(limits.MIN_RECALL_TOKENS, limits.MAX_RECALL_TOKENS),
    help=f"Token budget [default: {limits.DEFAULT_RECALL_TOKENS}].",
)
def recall_command(ctx, target, project, neighbors, max_tokens, as_json) -> None:
    """Print the exact archived text behind a search locator or a document id.

    Exits 0 when resolved, 1 for any other status (superseded, expired, missing,
    locator-invalid, lease-expired), which is printed.
    """
    params: dict[str, Any] = {"project": project}
    params["locator" if target.startswith("cwa1.") else "documentId"] = target
    if neighbors is not None:
        params["neighbors"] = neighbors
    if max_tokens is not None:
        params["maxTokens"] = max_tokens
    result = _run(ctx, "recall", params, as_json, lambda found: _print_recall(ctx, found, project))
    if result["status"] != "resolved":
        sys.exit(NEGATIVE_ANSWER_EXIT)


@archive_command(main, "gather")
@click.argument("words", nargs=-1, required=True)
@click.option(
    "--intent",
    type=click.Choice(("auto", "state", "workflow")),
    default="auto",
    show_default=True,
    help="Neighbours per match: auto 1 before / 3 after, state none, workflow 1 / 8.",
)
@click.option("--scope", type=click.Choice(SCOPES), default="project", show_default=True, help="Where to look.")
@project_option()
@click.option("--session", "session_id", help="Current session id (needed for --scope session).")
@click.option(
    "--limit", type=click.IntRange(1, limits.MAX_GATHER_ANCHORS), help="Matches to gather around [default: 5]."
)
@click.option("--before", type=click.IntRange(0, limits.MAX_GATHER_BEFORE), help="Records before each match.")
@click.option("--after", type=click.IntRange(0, limits.MAX_GATHER_AFTER), help="Records after each match.")
@click.option(
    "--max-evidence", type=click.IntRange(1, limits.MAX_GATHER_EVIDENCE), help="Records in all [default: 12]."
)
@click.option(
    "--max-tokens",
    type=click.IntRange(limits.MIN_PACKET_TOKENS, limits.MAX_PACKET_TOKENS),
    help="Budget of the whole packet [default: 2,000].",
)
def gather_command(
    ctx, words, intent, scope, project, session_id, limit, before, after, max_evidence, max_tokens, as_json
) -> None:
    """Dated records in the order they were written, around the best matches for a question.

    \b
    Examples:
      cwa gather what did we try for the flaky test, and what did we settle on
      cwa gather --intent workflow src/retry.py
    """
    params: dict[str, Any] = {"query": " ".join(words), "intent": intent, "scope": scope, "project": project}
    for key, value in (
        ("sessionId", session_id),
        ("limit", limit),
        ("before", before),
        ("after", after),
        ("maxEvidence", max_evidence),
        ("maxTokens", max_tokens),
    ):
        if value is not None:
            params[key] = value
    _run(ctx, "gather", params, as_json, lambda found: _print_packet(found, "gather"))


def _print_packet(found: dict[str, Any], what: str) -> None:
    items = found.get("records", found.get("items", []))
    from cwa.retrieve import render

    click.echo(render.packet(what, items, utc_now(), for_model=False))
    if found.get("omitted"):
        click.echo(f"\n({found['omitted']} more record(s) did not fit the budget)")


@archive_command(main, "traverse")
@click.argument("target")
@project_option()
@click.option(
    "--after",
    "after",
    type=click.IntRange(1, limits.MAX_TRAVERSE_PAGE),
    help="Page forward: this many records after the anchor [default: 20].",
)
@click.option(
    "--before",
    "before",
    type=click.IntRange(1, limits.MAX_TRAVERSE_PAGE),
    help="Page backward: this many records before the anchor.",
)
@click.option(
    "--scan-limit", type=click.IntRange(1, limits.MAX_TRAVERSE_SCAN), help="Records examined at most [default: 2,048]."
)
@click.option(
    "--max-tokens",
    type=click.IntRange(limits.MIN_PACKET_TOKENS, limits.MAX_PACKET_TOKENS),
    help="Budget of the page [default: 4,000].",
)
def traverse_command(ctx, target, project, after, before, scan_limit, max_tokens, as_json) -> None:
    """Page through a session's records in order from a locator, a document id or a cursor.

    Exits 0 with records, 1 when the locator or cursor is invalid or names nothing.
    """
    if after and before:
        raise InvalidRequest("give --after or --before, not both", field="after", reason="conflicting")
    params: dict[str, Any] = {"project": project}
    key = "cursor" if target.startswith("cwa1t.") else "locator" if target.startswith("cwa1.") else "documentId"
    params[key] = target
    if key != "cursor":
        params["direction"] = "before" if before else "after"
    params["limit"] = before or after or 20
    if scan_limit:
        params["scanLimit"] = scan_limit
    if max_tokens:
        params["maxTokens"] = max_tokens

    def show(found: dict[str, Any]) -> None:
        if found["status"] != "ok":
            click.echo(f"{found['status']}: {found['reason']}")
            return
        _print_packet(found, "traverse")
        if found["cursor"]:
            click.echo(
                f"\n(stopped: {found['stopReason']}, {found['scanned']} examined; continue: "
                f"{_command_line(ctx, 'traverse', found['cursor'], *_project_args(project))})"
            )

    result = _run(ctx, "traverse", params, as_json, show)
    if result["status"] != "ok":
        sys.exit(NEGATIVE_ANSWER_EXIT)


@functools.cache
def _invocation() -> list[str]:
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


def _command_line(ctx: click.Context, *args: str) -> str:
    """A command line to print for the user to type: quoted, runnable from any folder, and naming
    the archive when it is not the one a plain `cwa` would open."""
    from cwa.store.connection import default_archive_path

    archive = [] if ctx.obj["db"] == default_archive_path() else ["--db", str(ctx.obj["db"])]
    return shlex.join((*_invocation(), *archive, *args))


def _project_args(project: str) -> tuple[str, ...]:
    """`--project P` for a printed command, unless P is what the command would default to."""
    return () if project == str(_project_dir()) else ("--project", project)


def _print_recall(ctx: click.Context, result: dict[str, Any], project: str) -> None:
    from cwa.retrieve import render

    click.echo(render.recall_result(result, utc_now(), for_model=False))
    if result["status"] == "resolved" and not result["text"]:
        click.echo(_dump(result.get("tableOfContents")))
    for side, locator in (result.get("continuation") or {}).items():
        click.echo(f"\n(continues {side}: {_command_line(ctx, 'recall', *_project_args(project), locator)})")


@archive_command(main, "supersede")
@click.argument("document_id")
@click.option("--by", "replacement", required=True, help="The document that replaces it.")
def supersede_command(ctx, document_id, replacement, as_json) -> None:
    """Retire DOCUMENT_ID in favour of another document of the same project."""
    _run(
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
        _run(
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

    _run(ctx, "checkpoint", params, as_json, show, progress="archiving")


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
    _run(
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
        go_ahead = _command_line(
            ctx,
            "redact",
            "--project",
            project,
            *(("--session", session_id) if session_id else ()),
            "--confirm",
            result["confirm"],
        )
        click.echo(f"{result['documents']} document(s) in {where} would be redacted.\nTo go ahead: {go_ahead}")

    _run(ctx, "redact", params, as_json, show)


def _print_decision(decision: dict[str, Any]) -> None:
    metrics = decision["metrics"]
    click.echo(f"message {decision['messageKey']}: {decision['outcome']} ({decision['reason']})")
    click.echo(f"  decided {decision['decidedAt']} at index generation {decision['generation']}")
    shown = ", ".join(f"{k} {v}" for k, v in metrics.items() if v is not None)
    click.echo(f"  {shown}")
    for hint in decision["hints"]:
        source = hint["source"]
        click.echo(
            f"  hint {hint['type']}, {hint['tokens']} tokens, from {source['documentId']} v{source['version']} "
            f"({source['kind']}, {source['createdAt'][:10]})"
        )


@archive_command(main, "preflight")
@click.argument("text", required=False)
@click.option("--session", "session_id", required=True, help="The session the message belongs to.")
@click.option("--message-key", required=True, help="Stable key of the user message.")
@project_option()
@click.option("--active", "active", multiple=True, help="A user-message key still in the context (repeatable).")
@click.option("--visible", "visible", multiple=True, help="A message key still visible to the model (repeatable).")
@click.option("--explain", is_flag=True, help="Also show (or, without TEXT, only show) the decision.")
def preflight_command(ctx, text, session_id, message_key, project, active, visible, explain, as_json) -> None:
    """Decide the automatic hint for one user message, once; later calls replay it.

    Prints exactly the bytes to insert after the message (nothing when there is no hint). TEXT
    "-" reads the message from stdin. With --explain and no TEXT, shows the recorded decision.

    \b
    Examples:
      cwa preflight --session s1 --message-key m7 "could tablets help here?"
      cwa preflight --session s1 --message-key m7 --explain
    """
    identity = {"project": project, "sessionId": session_id, "messageKey": message_key}
    with _open(ctx) as archive:
        if text is None:
            if not explain:
                raise InvalidRequest(
                    "give the message TEXT, or --explain to show a recorded decision", field="text", reason="missing"
                )
            decision = archive.call("why", identity)
            click.echo(_dump(decision)) if as_json else _print_decision(decision)
            return
        if text == "-":
            text = read_stream(sys.stdin.buffer, limits.MAX_DOCUMENT_BYTES, "the message").decode(
                "utf-8", errors="replace"
            )
        params = {
            **identity,
            "text": text,
            "activeMessageKeys": list(active),
            "excludeVisibleSourceKeys": list(visible),
        }
        response = archive.call("preflight", params)
        decision = archive.call("why", identity) if explain else None
    if as_json:
        click.echo(_dump({**response, "explain": decision} if explain else response))
        return
    if response["modelVisibleText"]:
        click.echo(response["modelVisibleText"].removeprefix("\n\n"))
    if decision is not None:
        _print_decision(decision)


@archive_command(main, "why")
@click.option("--session", "session_id", required=True, help="The session of the message.")
@click.option("--message-key", help="The user message [default: the session's latest decision].")
@project_option()
def why_command(ctx, session_id, message_key, project, as_json) -> None:
    """Why preflight did (or did not) add a hint: outcome, reason code and metrics, never text."""
    params = {"project": project, "sessionId": session_id}
    if message_key:
        params["messageKey"] = message_key
    _run(ctx, "why", params, as_json, _print_decision)


@archive_command(main, "maintain")
@click.option(
    "--limit",
    type=click.IntRange(1, limits.MAX_MAINTENANCE_STEPS),
    default=limits.DEFAULT_MAINTENANCE_STEPS,
    show_default=True,
    help="Rows each task may touch in this pass.",
)
@click.option(
    "--vacuum",
    is_flag=True,
    help="Finish with a full VACUUM (rewrites the file; also enables incremental auto-vacuum on an old archive).",
)
@click.option(
    "--embed",
    type=click.IntRange(0, limits.MAX_MAINTENANCE_STEPS),
    default=0,
    show_default=True,
    help="Also embed up to N queued windows for semantic search (needs the local model).",
)
def maintain_command(ctx, limit, vacuum, embed, as_json) -> None:
    """One bounded maintenance pass: due expiries, purge of expired and redacted bytes, expired
    leases and protections, preflight ledgers, then free pages back to the file system. Run it
    again while it says more work is left."""
    _run(ctx, "maintain", {"limit": limit, "vacuum": vacuum, "embed": embed}, as_json, _print_maintenance)


def _print_maintenance(result: dict[str, Any]) -> None:
    space = result["space"]
    click.echo(
        f"expired {result['expired']} (postponed {result['expiryPostponed']}), purged {result['purged']}; "
        f"leases deleted {result['leasesDeleted']}, protections {result['protectionsDeleted']}; "
        f"exposures tombstoned {result['exposuresTombstoned']}, deleted {result['exposuresDeleted']}; "
        f"hint records reclaimed {result['hintRecordsReclaimed']}"
    )
    if "embedded" in result:
        click.echo(f"embedded {result['embedded']} window(s); {result['embeddingPending']} still queued")
    click.echo(
        f"file {_size(space['fileBytesBefore'])} -> {_size(space['fileBytesAfter'])}"
        + (f" ({space['action']})" if space["action"] else "")
        + ("; more work left: run again" if result["more"] else "")
    )


@main.group("eval")
def eval_group() -> None:
    """Quality gates over fixtures shipped with cwa."""


@eval_group.command("locomo")
@click.option(
    "--data",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="locomo10.json (read in place, never copied).",
)
@click.option(
    "--modes",
    default="fts5,fused-lexical,fused-hybrid,neighbors,lexical,auto,hybrid,hybrid+rerank",
    show_default=True,
    help="Comma-separated: fts5 (bare SQLite FTS5), plain, fused-lexical, fused-hybrid, neighbors (the "
    "rank fusion before the learned ranker), lexical, auto, hybrid, hybrid+rerank (learned ranker, "
    "reported out of fold; hybrid+rerank is skipped without a reranker).",
)
@click.option(
    "--embedding",
    type=click.Choice(["installed", "optimized"]),
    default="installed",
    show_default=True,
    help="optimized: run `models optimize` on the temporary archive first (used if accepted).",
)
@click.option(
    "--coding-training/--no-coding-training",
    default=True,
    show_default=True,
    help="Train the fold rankers on the synthetic coding facts too, as the shipped ranker is (about two minutes more).",
)
@json_option
@handles_errors
def eval_locomo(data, modes, embedding, coding_training, as_json) -> None:
    """Turn-level retrieval on LoCoMo through the public search: R@1/5/10, hit@k, nDCG@10 and
    session recall, overall and per category, for each mode (a temporary archive; embedding
    shows a progress bar). The learned ranker is trained per fold of conversations and each
    conversation is scored by the fold that did not see it; preflight's "Remind me" snippets are
    measured the same way."""
    from cwa.evaluation.locomo import FLOOR, MODES, load, print_report, run

    chosen = [m.strip() for m in modes.split(",") if m.strip()]
    known = (FLOOR, *MODES)
    unknown = sorted(set(chosen) - set(known))
    if unknown or not chosen:
        raise InvalidRequest(
            f"unknown mode(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(known)}",
            field="modes",
            reason="unknown-mode",
        )
    load(data)  # a file that is not LoCoMo is refused before any work
    with _progress_bar("embedding") as progress:
        report = run(data, chosen, None if as_json else progress, embedding, coding_training)
    click.echo(_dump(report)) if as_json else print_report(report)


@eval_group.command("coding")
@click.option(
    "--documents",
    type=click.IntRange(100, 1_000_000),
    default=3000,
    show_default=True,
    help="Background documents of synthetic coding sessions.",
)
@click.option(
    "--facts",
    type=click.IntRange(4, 10_000),
    default=160,
    show_default=True,
    help="Facts planted in them, each asked about later.",
)
@click.option("--seed", type=int, default=11, show_default=True, help="Generator seed (the ranker trains on seed 5).")
@json_option
@handles_errors
def eval_coding(documents, facts, seed, as_json) -> None:
    """Retrieval on synthetic coding sessions with answers known by construction (identifier,
    error, decision, answer-after-question): R@1/5/10 for the fused and the learned ranking, in a
    temporary archive."""
    from cwa.evaluation.coding import print_report, run

    report = run(documents, facts, seed)
    click.echo(_dump(report)) if as_json else print_report(report)


@eval_group.command("perf")
@click.option(
    "--sizes",
    default="10000",
    show_default=True,
    help="Comma-separated window counts, e.g. 10000,100000,1000000 (larger sizes take long: about "
    "an hour for 1M on two cores).",
)
@click.option(
    "--corpora",
    default="coding,chat",
    show_default=True,
    help="Comma-separated: coding (synthetic coding sessions), chat (LoCoMo-shaped short turns).",
)
@click.option(
    "--queries",
    "count",
    type=click.IntRange(10, 10_000),
    default=200,
    show_default=True,
    help="Requests per operation.",
)
@click.option(
    "--embed-sample",
    type=click.IntRange(0, 10_000_000),
    default=1000,
    show_default=True,
    help="Windows embedded with the model (the throughput figure); the rest get seeded random "
    "vectors, which cost the vector scan the same.",
)
@json_option
@handles_errors
def eval_perf(sizes, corpora, count, embed_sample, as_json) -> None:
    """Admission, search, preflight, recall and gather cost, archive bytes by kind, serve RSS
    and cold start at each size, against a bare-FTS5 floor of the same texts (temporary
    archives; docs/performance.md)."""
    from cwa.evaluation.perf.scale import CORPORA, print_report, run

    try:
        chosen_sizes = [int(s.replace("_", "")) for s in sizes.split(",") if s.strip()]
    except ValueError:
        chosen_sizes = []
    if not chosen_sizes or any(not 1_000 <= s <= 10_000_000 for s in chosen_sizes):
        raise InvalidRequest(
            f"sizes must be window counts from 1,000 to 10,000,000, got {sizes!r}", field="sizes", reason="invalid-size"
        )
    chosen = [c.strip() for c in corpora.split(",") if c.strip()]
    unknown = sorted(set(chosen) - set(CORPORA))
    if unknown or not chosen:
        raise InvalidRequest(
            f"unknown corpus {', '.join(unknown) or '(none)'}; choose from {', '.join(CORPORA)}",
            field="corpora",
            reason="unknown-corpus",
        )
    say = (lambda _: None) if as_json else (lambda line: click.echo(f"… {line}", err=True))
    report = run(chosen_sizes, chosen, count, embed_sample, say)
    click.echo(_dump(report)) if as_json else print_report(report)


@eval_group.command("hints")
@click.option(
    "--fixture",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Case file [default: the shipped eval/retrieval/hint_cases.json].",
)
@json_option
@handles_errors
def eval_hints(fixture, as_json) -> None:
    """Run the automatic-hint cases and check the gates (exit 1 when one fails).

    Each case gets its own temporary archive; the metrics are recomputed from what preflight
    returned: marker and snippet recall, false positives, leaked candidate-only terms, stale
    reveals, budget violations and unsafe tool hints.
    """
    from cwa.evaluation.hints import evaluate, load_fixture

    report = evaluate(load_fixture(fixture))
    if as_json:
        click.echo(_dump(report))
    else:
        for name, value in report["metrics"].items():
            click.echo(f"{name:28} {value}")
        for gate in report["gates"]:
            click.echo(f"{'pass' if gate['passed'] else 'FAIL'}  {gate['metric']} {gate['rule']}")
        for miss in report["failures"]:
            click.echo(f"  case {miss['case']}: expected {miss['expected']}, got {miss['outcome']} ({miss['reason']})")
    if not report["passed"]:
        sys.exit(NEGATIVE_ANSWER_EXIT)


@main.group("index")
def index_group() -> None:
    """Derived indexes (exact anchors, BM25F windows, structural cues, embeddings)."""


@archive_command(index_group, "rebuild")
def index_rebuild(ctx, as_json) -> None:
    """Recompute every derived index from the archived documents."""

    def show(result: dict[str, Any]) -> None:
        outcomes = "; ".join(
            f"{handler}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            for handler, counts in sorted(result["outcomes"].items())
        )
        click.echo(f"rebuilt {result['documents']} document(s) in generation {result['generation']}; {outcomes}")

    _run(ctx, "index-rebuild", {}, as_json, show, progress="indexing")


@archive_command(index_group, "embed")
@click.option(
    "--limit",
    type=click.IntRange(1, limits.MAX_EMBED_WINDOWS),
    help="Embed at most this many windows [default: all queued].",
)
def index_embed(ctx, limit, as_json) -> None:
    """Embed the queued windows for semantic search (local model; progress bar)."""
    params = {"limit": limit} if limit else {}
    _run(
        ctx,
        "index-embed",
        params,
        as_json,
        progress="embedding",
        show=lambda result: click.echo(
            f"embedded {result['embedded']} window(s); {result['pending']} pending; model {result['fingerprint']}"
            + (" (new model: every window was queued again)" if result["modelChanged"] else "")
        ),
    )


@main.group("models")
def models_group() -> None:
    """Local models (embedding, reranker): installed from packages, never downloaded at run time."""


@archive_command(models_group, "status")
def models_status(ctx, as_json) -> None:
    """What is installed, where, its fingerprint, and what the archive's vectors came from."""
    _run(ctx, "models-status", {}, as_json, _print_models)


def _print_models(result: dict[str, Any]) -> None:
    embedding = result["embedding"]
    if embedding["installed"]:
        click.echo(
            f"embedding  {embedding['model']} ({embedding['dimensions']} dims, {embedding['pooling']}, "
            f"truncate {embedding['maxTokens']})"
        )
        click.echo(
            f"  weights   {embedding['weights']} ({embedding['weightsPackage']}, {embedding['weightsBytes']} bytes)"
        )
        click.echo(f"  tokenizer {embedding['tokenizer']} ({embedding['tokenizerPackage']})")
        click.echo(f"  fingerprint {embedding['fingerprint']}")
    else:
        click.echo(f"embedding  not installed: {embedding['reason']}")
    click.echo(
        f"reranker   {'installed' if result['reranker']['installed'] else 'not installed: ' + result['reranker']['reason']}"
    )
    archive_part = result["archive"]
    click.echo(
        f"archive    vectors from {archive_part['fingerprint'] or 'no model yet'}; "
        f"{archive_part['pendingWindows']} window content(s) queued"
    )
    if archive_part["model"]:
        click.echo(f"  uses     {archive_part['model']['variant']} ({archive_part['model']['fingerprint']})")
    verdict = archive_part["optimized"]
    if verdict:
        click.echo(
            f"  optimize {'accepted' if verdict['accepted'] else 'rejected'}: {verdict['speedup']}x, "
            f"mean cosine {verdict['meanCosine']} over {verdict['windows']} windows ({verdict['createdAt']})"
            + ("" if verdict["current"] else "; built for another model: run `cwa models optimize` again")
        )


@archive_command(
    models_group,
    "optimize",
    help=(
        "Build a per-channel int8 re-quantization of the embedding model beside the archive, then measure it "
        "on the archive's windows against the installed model. It is used for this archive only if it is at "
        f"least {limits.VARIANT_MIN_SPEEDUP}x faster with known-item recall not lower and mean cosine >= "
        f"{limits.VARIANT_MIN_COSINE}; the archive's vectors are then rebuilt in the background. Needs the onnx "
        "package (pip install 'cwa[optimize]')."
    ),
)
def models_optimize(ctx, as_json) -> None:
    _run(ctx, "models-optimize", {}, as_json, _print_optimized, progress="optimizing")


def _print_optimized(result: dict[str, Any]) -> None:
    original, optimized = result["measured"]["original"], result["measured"]["optimized"]
    click.echo(
        f"variant {result['variant']}: {result['speedup']}x "
        f"({original['msPerWindow']} -> {optimized['msPerWindow']} ms a window over {result['windows']} windows)"
    )
    click.echo(
        f"known-item recall@1 {original['knownItemR@1']} -> {optimized['knownItemR@1']}, "
        f"recall@10 {original['knownItemR@10']} -> {optimized['knownItemR@10']}, "
        f"mean cosine {result['meanCosine']}"
    )
    if result["accepted"]:
        click.echo(
            f"accepted: this archive now embeds with {result['fingerprint']}; "
            "its windows are queued again (`cwa index embed`, or `cwa serve` in the background)"
        )
    else:
        click.echo("rejected: the archive keeps the installed model")


def _install(pinned_name: str, as_json: bool) -> None:
    from cwa import model_install
    from cwa.models import models_folder

    pinned = getattr(model_install, pinned_name)
    target = models_folder() / pinned.name
    if as_json:
        result = model_install.install(pinned, target)
        click.echo(_dump(result))
        return
    with _progress_bar(f"downloading {pinned.repo}") as progress:
        result = model_install.install(pinned, target, progress)
    click.echo(
        f"installed {result['model']}@{result['revision'][:12]} in {result['folder']} "
        f"(identity check {result['identityCheck']['found']})"
    )


@models_group.command("install")
@json_option
@handles_errors
def models_install(as_json) -> None:
    """Download the pinned all-MiniLM-L6-v2 (fp32 ONNX) into the models folder, for machines
    where the weights package cannot be installed. Needs the network (HF_ENDPOINT names a
    mirror); nothing else in cwa downloads. The packaged weights win when both exist."""
    _install("EMBEDDING", as_json)


@models_group.command("install-reranker")
@json_option
@handles_errors
def models_install_reranker(as_json) -> None:
    """Download the pinned ms-marco-MiniLM-L6-v2 cross-encoder (ONNX) into the models folder
    (the default rerankerPath), checked against its model card's reference scores. Explicit
    search then reranks its lexical/semantic tier. Needs the network."""
    _install("RERANKER", as_json)


def _demo_commands(ctx: click.Context, report: dict[str, Any]) -> dict[str, Any]:
    """The command lines that show each step of the demo again when typed: they name the demo's
    project (the CLI's default is the working directory's) and the archive when it is not the
    default one."""
    from cwa import demo as sample

    line = functools.partial(_command_line, ctx)
    project = ("--project", sample.DEMO_PROJECT)
    return {
        "searches": [
            line("search", *project, "--limit", str(sample.DEMO_SEARCH_LIMIT), query) for query in sample.DEMO_QUERIES
        ],
        "correction": line("search", *project, "--relation", sample.DEMO_RELATION),
        "recall": line(
            "recall",
            *project,
            "--max-tokens",
            str(sample.DEMO_RECALL_TOKENS),
            report["searches"][0]["results"][0]["locator"],
        ),
        "why": [
            line("why", *project, "--session", sample.DEMO_NEXT_SESSION, "--message-key", item["key"])
            for item in report["preflight"]
        ],
        "sql": shlex.join(
            (
                "sqlite3",
                report["archive"],
                "select document_id, kind, created_at, byte_length from live_documents order by created_at",
            )
        ),
    }


def _print_demo(ctx: click.Context, report: dict[str, Any]) -> None:
    commands = report["commands"]
    click.echo(f"Archived a sample coding session into {report['archive']}")
    click.echo(
        f"project {report['project']} (its own project: the commands below name it with --project,\n"
        "since the CLI's default project is the working directory)\n"
    )
    for item in report["admitted"]:
        state = "new" if item["created"] else "already archived"
        click.echo(f"  {item['kind']:<12} {item['documentId']} v{item['version']}  ({state})")
    click.echo("")
    _print_status(report["status"])
    click.echo("\nOne stored document, with the byte coordinates of its messages:\n")
    _print_document(report["example"])
    for command, response in zip(commands["searches"], report["searches"]):
        click.echo(f"\n$ {command}")
        _print_results(response)
    click.echo(f"\n$ {commands['correction']}")
    _print_results(report["correction"])
    click.echo(f"\n$ {commands['recall']}")
    _print_recall(ctx, report["recall"], report["project"])
    click.echo("\nThe next day, preflight decides once per user message whether to add a hint:")
    for item, why in zip(report["preflight"], commands["why"]):
        diagnostics = item["diagnostics"]
        click.echo(f"\n> {item['text']}\n  [{diagnostics['outcome']}: {diagnostics['reason']}]")
        for line in item["modelVisibleText"].strip("\n").splitlines():
            click.echo(f"  {line}")
        click.echo(f"  (why: {why})")
    click.echo(f"\nLook inside with SQL:\n  {commands['sql']}")


@archive_command(main)
def demo(ctx: click.Context, as_json: bool) -> None:
    """Archive a small sample coding session and show what was stored.

    The sample has fixed ids and timestamps: running it again stores nothing new.
    """
    from cwa.demo import run_demo

    with _open(ctx) as archive:
        report = run_demo(archive)
    report["commands"] = _demo_commands(ctx, report)
    click.echo(_dump(report)) if as_json else _print_demo(ctx, report)


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
@handles_errors(always_json=True)
def call(ctx: click.Context, method: str) -> None:
    from cwa.api import method_named
    from cwa.json_input import parse_json_body

    method_named(method)  # an unknown method fails before stdin is read
    # the contract bounds the params' nesting (bounded=False: checked once)
    params = parse_json_body(read_stream(sys.stdin.buffer, limits.MAX_REQUEST_BYTES, "params"), "params", bounded=False)
    with _open(ctx) as archive:
        result = archive.call(method, params)
        # answered before the archive closes: closing may still archive a long history (catch-up)
        sys.stdout.buffer.write(orjson.dumps(result) + b"\n")
        sys.stdout.buffer.flush()


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
def serve(ctx: click.Context, background: bool, maintenance_interval: float) -> None:
    """Serve methods as JSON lines on stdin/stdout until end of input.

    \b
    Each line {"id", "method", "params"} is answered by one line, {"id", "result"} or
    {"id", "error": {"code", "message", "details"}}. Methods: see docs/contract.md.
    Meanwhile, queued windows are embedded in small background batches (--no-background: not),
    and every --maintenance-interval seconds one bounded maintenance pass runs (as `cwa maintain`).
    """
    from cwa.serve import serve_archive

    try:
        sys.exit(
            serve_archive(
                lambda: _open(ctx),
                sys.stdin.buffer,
                sys.stdout.buffer,
                background=background,
                maintenance_interval=maintenance_interval,
            )
        )
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(Internal.exit_code)


@archive_command(main, "doctor")
@click.option(
    "--repair",
    is_flag=True,
    help="Fix what derived data can fix: rebuild indexes (in batches), "
    "index or expire checkpoint parts, tighten permissions.",
)
@click.option(
    "--sample",
    type=click.IntRange(1, limits.MAX_DOCTOR_SAMPLE),
    help="Documents and windows checked against their digests [default: 64].",
)
def doctor(ctx, repair, sample, as_json) -> None:
    """Check the archive: integrity, schema, derived indexes against canonical rows, orphan
    checkpoint parts, permissions, disk headroom. Exit 0 only when healthy (1 otherwise)."""
    params = {"repair": repair, **({"sample": sample} if sample else {})}

    def show(result: dict[str, Any]) -> None:
        for check in result["checks"]:
            click.echo(
                f"{'ok  ' if check['ok'] else 'FAIL'} {check['name']:18} {check['detail']}"
                + (" (--repair fixes it)" if check["repairable"] else "")
            )
        for done in result["repaired"]:
            click.echo(f"repaired: {done}")
        click.echo(f"{result['path']}: {'healthy' if result['healthy'] else 'NOT healthy'}")

    try:
        result = _run(ctx, "doctor", params, as_json, show, progress="rebuilding" if repair else None)
    except ArchiveCorrupt as error:  # too damaged to open: still a report, with what to do
        from cwa.api import damaged_archive_report

        result = damaged_archive_report(ctx.obj["db"], config.load_settings(_project_dir()), error)
        click.echo(_dump(result)) if as_json else show(result)
    if not result["healthy"]:
        sys.exit(1)


@main.group("evidence", invoke_without_command=True)
@click.option(
    "--out", "out", type=click.Path(dir_okay=False, path_type=Path), help="Write the record here [default: stdout]."
)
@click.option("--no-gates", is_flag=True, help="Leave out the hint-quality gates (they take a few seconds).")
@click.pass_context
@handles_errors(always_json=False)
def evidence_group(ctx: click.Context, out: Path | None, no_gates: bool) -> None:
    """Record a verification run in aggregates only: versions, the source hash, archive counts and
    bytes, doctor and hint-gate results with durations and exit statuses. The record is checked by
    `cwa evidence verify` before it is written; exit 1 when a check failed.

    \b
    cwa evidence --out evidence.json
    cwa evidence verify evidence.json   # exit 1 (with the reasons) when it holds more than aggregates
    """
    if ctx.invoked_subcommand is not None:
        return
    from cwa import evidence

    try:
        with _open(ctx) as archive:
            record = evidence.collect(archive.call, archive.clock(), gates=not no_gates)
    except ArchiveCorrupt as error:  # recorded as a failed run, with the doctor's findings
        from cwa.api import damaged_archive_report
        from cwa.timestamps import utc_now

        report = damaged_archive_report(ctx.obj["db"], config.load_settings(_project_dir()), error)
        record = evidence.collect_damaged(report, error, utc_now(), gates=not no_gates)
    problems = evidence.findings(record)
    if problems:  # a bug of ours: never write such a record
        raise Internal(f"the evidence record would hold more than aggregates: {problems[:3]}")
    text = _dump(record)
    if out is None:
        click.echo(text)
    else:
        write_atomically(out, (text + "\n").encode("utf-8"))
        click.echo(f"evidence written to {out}: {'passed' if record['passed'] else 'a check FAILED'}", err=True)
    if not record["passed"]:
        sys.exit(1)


@evidence_group.command("verify")
@click.argument("record", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@json_option
@handles_errors
def evidence_verify(record: Path, as_json: bool) -> None:
    """Reject a record holding prompts or recalled text, environment values, credentials, home
    directories or user names, absolute paths, session ids or raw database keys (exit 1)."""
    from cwa import evidence
    from cwa.json_input import parse_json_body

    data = parse_json_body(read_file(record, limits.MAX_REQUEST_BYTES), "record")
    problems = evidence.findings(data)
    if as_json:
        click.echo(_dump({"clean": not problems, "findings": problems}))
    else:
        for problem in problems:
            click.echo(f"{problem['path']}: {problem['reason']}")
        click.echo("clean: aggregates only" if not problems else f"REJECTED: {len(problems)} finding(s)")
    if problems:
        sys.exit(1)


@main.group("mcp", invoke_without_command=True)
@click.pass_context
@handles_errors
def mcp_group(ctx: click.Context) -> None:
    """Serve the archive's agent tools over MCP on stdin/stdout (needs `pip install 'cwa[mcp]'`).

    \b
    Project: $CWA_PROJECT, else the real path of the working directory.
    Session: $CWA_SESSION, else one id per server process.
    cwa mcp install claude|codex|opencode [--write]   # the client's configuration (docs/mcp.md)
    """
    if ctx.invoked_subcommand is not None:
        return
    from cwa.mcp_server import serve_stdio

    sys.exit(serve_stdio(lambda: _open(ctx), os.environ))


@mcp_group.command("install")
@click.argument("client", type=click.Choice(("claude", "codex", "opencode")))
@click.option("--write", is_flag=True, help="Merge the entry into the client's configuration file (idempotent).")
@json_option
@handles_errors
def mcp_install(client: str, write: bool, as_json: bool) -> None:
    """Print the configuration entry that starts `cwa mcp` in CLIENT, or merge it with --write:
    claude → ./.mcp.json, codex → ~/.codex/config.toml, opencode → ./opencode.json."""
    from cwa.integrations.mcp_clients import install

    result = install(client, _project_dir(), os.environ, write)
    if as_json:
        click.echo(_dump(result))
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

    Sessions, turns, hints and why, rotations and previews, expiries and bytes, with facets and
    full-text search; bound to 127.0.0.1 only. Stop it with Ctrl-C. See docs/browse.md.
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

        result = getattr(pi_settings, name)(_project_dir() if in_project else None, os.environ)
        if as_json:
            click.echo(_dump(result))
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


@main.group("session")
def session_group() -> None:
    """The session engine as a host drives it: status, and replay of a transcript (for debugging a
    host integration)."""


def _model_options(command: Callable) -> Callable:
    for option in reversed(
        (
            click.option(
                "--context-window",
                type=click.IntRange(0, limits.MAX_CONTEXT_WINDOW),
                default=0,
                help="The model's context window in tokens [default: unknown, 96K usable assumed].",
            ),
            click.option(
                "--max-tokens",
                type=click.IntRange(0, limits.MAX_CONTEXT_WINDOW),
                default=0,
                help="The model's output limit (the default reserve).",
            ),
            click.option(
                "--reserve",
                type=click.IntRange(0, limits.MAX_CONTEXT_WINDOW),
                help="Tokens kept free for the answer [default: --max-tokens].",
            ),
        )
    ):
        command = option(command)
    return command


def _read_transcript(source: Path) -> tuple[list[dict[str, Any]], str | None]:
    from cwa.session.transcript_file import parent_session_id, read_transcript

    messages, header = read_transcript(source)
    return messages, parent_session_id(header)


def _print_session_status(status: dict[str, Any]) -> None:
    limits_ = status.get("limits")
    if status.get("tokens") is None or not limits_:
        click.echo(
            f"epoch {status['epoch']} · {status.get('archivedGroups', 0)} archived group(s) "
            "(turns and tokens are known to the process that holds the transcript; try --file)"
        )
    else:
        click.echo(
            f"epoch {status['epoch']} · {status['turns']}/{limits_['rotationTurns']} turns · "
            f"{status['tokens']:,}/{limits_['rotationTokens']:,} tokens ({status['level']}) · "
            f"{status['externalized']} externalized · {status['oversized']} oversized · "
            f"hints {status['hintTokens']} tokens"
        )
    if status.get("emergencyRetention"):
        kept = status["emergencyRetention"]
        click.echo(f"emergency retention: kept {kept['kept']} of {kept['wanted']} groups at the last rotation")
    if status.get("checkpointNeeded"):
        click.echo("checkpoint needed: one interaction group exceeds the rotation target (compact the session)")
    if status.get("rotationQueued"):
        click.echo("rotation queued for the next user message")


def _context_params(
    project: str,
    session_id: str,
    parent: str | None,
    messages: list,
    context_window: int,
    max_tokens: int,
    reserve: int | None,
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "project": project,
        "sessionId": session_id,
        "messages": messages,
        "model": {"contextWindow": context_window, "maxTokens": max_tokens},
    }
    if parent:
        params["parentSessionId"] = parent
    if reserve is not None:
        params["reserveTokens"] = reserve
    return params


@archive_command(session_group, "status")
@click.option("--session", "session_id", required=True, help="The session.")
@project_option()
@click.option(
    "--file",
    "source",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The session's transcript (Pi session file or one message per line): adds turns and tokens.",
)
@_model_options
def session_status_command(ctx, session_id, project, source, context_window, max_tokens, reserve, as_json) -> None:
    """Epoch, turns and estimated tokens against the limits, emergency retention, a needed
    checkpoint, a queued rotation: the facts a host shows in its footer."""
    if source is None:
        _run(ctx, "session-status", {"project": project, "sessionId": session_id}, as_json, _print_session_status)
        return
    messages, parent = _read_transcript(source)
    params = _context_params(project, session_id, parent, messages, context_window, max_tokens, reserve)
    with _open(ctx) as archive:
        result = archive.call("session-context", params)
    click.echo(_dump(result["status"])) if as_json else _print_session_status(result["status"])


@archive_command(session_group, "replay")
@click.option("--session", "session_id", required=True, help="The session the transcript belongs to.")
@project_option()
@click.option(
    "--file",
    "source",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="A Pi session file, or a JSON-lines file of Pi messages.",
)
@click.option("--parent", help="The parent session id [default: from the Pi session header].")
@_model_options
def session_replay_command(
    ctx, session_id, project, source, parent, context_window, max_tokens, reserve, as_json
) -> None:
    """Print the provider copy a host would send for this transcript: what rotated out, what was
    externalized, where hints go. It runs the engine for real (decisions and archives are written
    as a host's call would write them, idempotently)."""
    messages, header_parent = _read_transcript(source)
    params = _context_params(
        project, session_id, parent or header_parent, messages, context_window, max_tokens, reserve
    )

    def show(result: dict[str, Any]) -> None:
        for index, message in enumerate(result["messages"]):
            text = _message_preview(message)
            click.echo(f"{index:>4} {message.get('role'):<17} {text}")
        for event in result["events"]:
            click.echo("event: " + orjson.dumps(event).decode())
        _print_session_status(result["status"])

    _run(ctx, "session-context", params, as_json, show)


def _message_preview(message: dict[str, Any]) -> str:
    from cwa.session.transcript import serialize

    _, text, _, _, _ = serialize(message, "message")
    label = "[hint] " if message.get("customType") == "cwa-hint" else ""
    flat = " ".join(text.split())
    return label + (flat[:100] + "…" if len(flat) > 100 else flat)


@main.group("config")
def config_group() -> None:
    """Show resolved settings, and which project folders are trusted."""


@config_group.command("show")
@click.option("--sources", is_flag=True, help="Also list every source and every rejected value.")
@json_option
@handles_errors
def config_show(sources: bool, as_json: bool) -> None:
    """Print every setting with the source it came from (for the current folder)."""
    settings = config.load_settings(_project_dir())
    if as_json:
        click.echo(_dump(settings.to_json(with_sources=sources)))
        return
    for key, value in settings.values.items():
        click.echo(f"{key:<32} {orjson.dumps(value).decode():<12} ({settings.origins[key]})")
    if not sources:
        return
    click.echo(f"\nproject folder {_project_dir()} is {'trusted' if settings.trusted_project else 'not trusted'}")
    click.echo("sources (lowest precedence first):")
    for report in settings.sources:
        detail = f" - {report.detail}" if report.detail else ""
        click.echo(f"  {report.name:<12} {report.status:<11} {report.location}{detail}")
    if settings.rejections:
        click.echo("rejected values (the next valid lower-precedence value applies):")
        for r in settings.rejections:
            click.echo(f"  {r.key} = {orjson.dumps(r.value).decode()} from {r.source}: {r.reason}")
    for source, key in settings.unknown_keys:
        click.echo(f"unknown key {key!r} in {source} (ignored)")


@config_group.command("trust")
@click.argument("folder", required=False, type=click.Path(exists=True, file_okay=False, path_type=Path))
@json_option
@handles_errors
def config_trust(folder: Path | None, as_json: bool) -> None:
    """Read FOLDER's .cwa.json and .pi/settings.json from now on [default: the cwd]."""
    trusted = config.edit_trusted(folder or _project_dir(), add=True)
    click.echo(_dump({"trustedProjects": trusted})) if as_json else click.echo(
        f"trusted: {os.path.realpath(folder or _project_dir())}"
    )


@config_group.command("untrust")
@click.argument("folder", required=False, type=click.Path(file_okay=False, path_type=Path))
@json_option
@handles_errors
def config_untrust(folder: Path | None, as_json: bool) -> None:
    """Stop reading FOLDER's project settings [default: the cwd]."""
    trusted = config.edit_trusted(folder or _project_dir(), add=False)
    click.echo(_dump({"trustedProjects": trusted})) if as_json else click.echo(
        f"no longer trusted: {os.path.realpath(folder or _project_dir())}"
    )
