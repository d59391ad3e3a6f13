"""Automatic hints: preflight and why, and `cwa evidence` (the hint gates' signed record)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cwa import config, limits
from cwa.cli.formatters import (
    print_decision,
)
from cwa.cli.root import main
from cwa.cli.shared import archive_command, json_option, open_archive, print_answer, project_option, run_method
from cwa.config import working_project
from cwa.errors import ArchiveCorrupt, Internal, InvalidRequest
from cwa.exits import dump_json, handles_errors, negative_answer
from cwa.file_writes import write_atomically
from cwa.input_files import read_file, read_stream


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
    with open_archive(ctx) as archive:
        if text is None:
            if not explain:
                raise InvalidRequest(
                    "give the message TEXT, or --explain to show a recorded decision", field="text", reason="missing"
                )
            decision = archive.call("why", identity)
            print_answer(decision, as_json, print_decision)
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
        click.echo(dump_json({**response, "explain": decision} if explain else response))
        return
    if response["modelVisibleText"]:
        click.echo(response["modelVisibleText"].removeprefix("\n\n"))
    if decision is not None:
        print_decision(decision)


@archive_command(main, "why")
@click.option("--session", "session_id", required=True, help="The session of the message.")
@click.option("--message-key", help="The user message [default: the session's latest decision].")
@project_option()
def why_command(ctx, session_id, message_key, project, as_json) -> None:
    """Why preflight did (or did not) add a hint: outcome, reason code and metrics, never text."""
    params = {"project": project, "sessionId": session_id}
    if message_key:
        params["messageKey"] = message_key
    run_method(ctx, "why", params, as_json, print_decision)


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
        with open_archive(ctx) as archive:
            record = evidence.collect(archive.call, archive.clock(), gates=not no_gates)
    except ArchiveCorrupt as error:  # recorded as a failed run, with the doctor's findings
        from cwa.api import damaged_archive_report
        from cwa.timestamps import utc_now

        report = damaged_archive_report(ctx.obj["db"], config.load_settings(working_project()), error)
        record = evidence.collect_damaged(report, error, utc_now(), gates=not no_gates)
    problems = evidence.findings(record)
    if problems:  # a bug of ours: never write such a record
        raise Internal(f"the evidence record would hold more than aggregates: {problems[:3]}")
    text = dump_json(record)
    if out is None:
        click.echo(text)
    else:
        write_atomically(out, (text + "\n").encode("utf-8"))
        click.echo(f"evidence written to {out}: {'passed' if record['passed'] else 'a check FAILED'}", err=True)
    if not record["passed"]:
        negative_answer()


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
        click.echo(dump_json({"clean": not problems, "findings": problems}))
    else:
        for problem in problems:
            click.echo(f"{problem['path']}: {problem['reason']}")
        click.echo("clean: aggregates only" if not problems else f"REJECTED: {len(problems)} finding(s)")
    if problems:
        negative_answer()
