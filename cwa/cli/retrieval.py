"""Commands that find and read back: search, recall, gather, traverse."""

from __future__ import annotations

from typing import Any

import click

from cwa import config, limits
from cwa.cli.formatters import (
    print_packet,
    print_recall,
    print_results,
)
from cwa.cli.root import main
from cwa.cli.shared import archive_command, command_line, open_archive, project_args, project_option, run_method
from cwa.errors import InvalidRequest
from cwa.exits import negative_answer
from cwa.vocabulary import GATHER_INTENTS, RELATIONS, SCOPES


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
    found = run_method(ctx, "search", params, as_json, print_results)
    if not found["results"] and not as_json and scope == "project":
        _hint_other_projects(ctx, project)


def _hint_other_projects(ctx: click.Context, project: str) -> None:
    """Nothing found in this folder's project: say which projects do hold documents."""
    with open_archive(ctx) as archive:
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
    result = run_method(ctx, "recall", params, as_json, lambda found: print_recall(ctx, found, project))
    if result["status"] != "resolved":
        negative_answer()


@archive_command(main, "gather")
@click.argument("words", nargs=-1, required=True)
@click.option(
    "--intent",
    type=click.Choice(GATHER_INTENTS),
    default="auto",
    show_default=True,
    help="Neighbours per match: auto 1 before / 3 after, state none, workflow 1 / 8.",
)
@click.option("--scope", type=click.Choice(SCOPES), default="project", show_default=True, help="Where to look.")
@project_option()
@click.option("--session", "session_id", help="Current session id (needed for --scope session).")
@click.option(
    "--limit",
    type=click.IntRange(1, limits.MAX_GATHER_ANCHORS),
    default=limits.DEFAULT_GATHER_ANCHORS,
    show_default=True,
    help="Matches to gather around.",
)
@click.option("--before", type=click.IntRange(0, limits.MAX_GATHER_BEFORE), help="Records before each match.")
@click.option("--after", type=click.IntRange(0, limits.MAX_GATHER_AFTER), help="Records after each match.")
@click.option(
    "--max-evidence",
    type=click.IntRange(1, limits.MAX_GATHER_EVIDENCE),
    default=limits.DEFAULT_GATHER_EVIDENCE,
    show_default=True,
    help="Records in all.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(limits.MIN_PACKET_TOKENS, limits.MAX_PACKET_TOKENS),
    default=limits.DEFAULT_GATHER_TOKENS,
    show_default=True,
    help="Budget of the whole packet.",
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
    run_method(ctx, "gather", params, as_json, lambda found: print_packet(found, "gather"))


@archive_command(main, "traverse")
@click.argument("target")
@project_option()
@click.option(
    "--after",
    "after",
    type=click.IntRange(1, limits.MAX_TRAVERSE_PAGE),
    help=f"Page forward: this many records after the anchor [default: {limits.DEFAULT_TRAVERSE_PAGE}].",
)
@click.option(
    "--before",
    "before",
    type=click.IntRange(1, limits.MAX_TRAVERSE_PAGE),
    help="Page backward: this many records before the anchor.",
)
@click.option(
    "--scan-limit",
    type=click.IntRange(1, limits.MAX_TRAVERSE_SCAN),
    default=limits.DEFAULT_TRAVERSE_SCAN,
    show_default=True,
    help="Records examined at most.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(limits.MIN_PACKET_TOKENS, limits.MAX_PACKET_TOKENS),
    default=limits.DEFAULT_TRAVERSE_TOKENS,
    show_default=True,
    help="Budget of the page.",
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
    params.update(limit=before or after or limits.DEFAULT_TRAVERSE_PAGE, scanLimit=scan_limit, maxTokens=max_tokens)

    def show(found: dict[str, Any]) -> None:
        if found["status"] != "ok":
            click.echo(f"{found['status']}: {found['reason']}")
            return
        print_packet(found, "traverse")
        if found["cursor"]:
            click.echo(
                f"\n(stopped: {found['stopReason']}, {found['scanned']} examined; continue: "
                f"{command_line(ctx, 'traverse', found['cursor'], *project_args(project))})"
            )

    result = run_method(ctx, "traverse", params, as_json, show)
    if result["status"] != "ok":
        negative_answer()
