"""`cwa session`: the session engine on a transcript file (status, replay)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import orjson

from cwa import limits
from cwa.cli.formatters import (
    message_preview,
    print_session_status,
)
from cwa.cli.root import main
from cwa.cli.shared import archive_command, project_option, run_method


@main.group("session")
def session_group() -> None:
    """The session engine as a host drives it: status, and replay of a transcript (for debugging a
    host integration)."""


def model_options(command: Callable) -> Callable:
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


def _model_params(messages: list, context_window: int, max_tokens: int, reserve: int | None) -> dict[str, Any]:
    params: dict[str, Any] = {"messages": messages, "model": {"contextWindow": context_window, "maxTokens": max_tokens}}
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
@model_options
def session_status_command(ctx, session_id, project, source, context_window, max_tokens, reserve, as_json) -> None:
    """Epoch, turns and estimated tokens against the limits, emergency retention, a needed
    checkpoint, a queued rotation: the facts a host shows in its footer."""
    params: dict[str, Any] = {"project": project, "sessionId": session_id}
    if source is not None:  # read-only: counted against what the archive records, nothing decided
        messages, _ = _read_transcript(source)
        params.update(_model_params(messages, context_window, max_tokens, reserve))
    run_method(ctx, "session-status", params, as_json, print_session_status)


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
@model_options
def session_replay_command(
    ctx, session_id, project, source, parent, context_window, max_tokens, reserve, as_json
) -> None:
    """Print the provider copy a host would send for this transcript: what rotated out, what was
    externalized, where hints go. It runs the engine for real (decisions and archives are written
    as a host's call would write them, idempotently)."""
    messages, header_parent = _read_transcript(source)
    params = {
        "project": project,
        "sessionId": session_id,
        **_model_params(messages, context_window, max_tokens, reserve),
    }
    if parent or header_parent:
        params["parentSessionId"] = parent or header_parent

    def show(result: dict[str, Any]) -> None:
        for index, message in enumerate(result["messages"]):
            text = message_preview(message)
            click.echo(f"{index:>4} {message.get('role'):<17} {text}")
        for event in result["events"]:
            click.echo("event: " + orjson.dumps(event).decode())
        print_session_status(result["status"])

    run_method(ctx, "session-context", params, as_json, show)
