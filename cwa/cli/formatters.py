"""Human-readable output of the archive's answers (the commands print JSON with --json)."""

from __future__ import annotations

import functools
import os
import shlex
from typing import Any

import click

from cwa import config
from cwa.cli.shared import command_line, human_size, project_args
from cwa.exits import dump_json
from cwa.timestamps import utc_now


def print_status(status: dict[str, Any]) -> None:
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
        f"bytes      logical {human_size(size['logical'])}, chunks {human_size(size['chunks'])}, "
        f"file {human_size(size['file'])}, free {human_size(size['free'])}, wal {human_size(size['wal'])}"
    )
    queue = status["indexQueue"]
    click.echo(
        f"indexing   {queue['documents']} document(s) waiting"
        + (f", the oldest for {queue['oldestSeconds']:.1f} s" if queue["documents"] else "")
    )
    if status["vectorsToConvert"]:
        click.echo(
            f"vectors    up to {status['vectorsToConvert']} float32 vector(s) still to convert to int8 "
            "(cwa serve and cwa maintain do it)"
        )
    if status["chunksToPack"]:
        click.echo(
            f"chunks     up to {status['chunksToPack']} chunk(s) stored before schema 38 still to deflate "
            "(cwa serve and cwa maintain do it)"
        )


def print_lifecycle(found: dict[str, Any]) -> None:
    for retention_class, states in sorted(found["byClass"].items()):
        shown = ", ".join(f"{state} {v['documents']} ({human_size(v['bytes'])})" for state, v in sorted(states.items()))
        click.echo(f"  {retention_class:<12} {shown}")
    size = found["bytes"]
    click.echo(
        f"  bytes      logical {human_size(size['logical'])}, chunks {human_size(size['chunks'])}, index "
        f"{human_size(size['index'])}, vectors {human_size(size['vectors'])}, other {human_size(size['other'])}, "
        f"free {human_size(size['free'])} (auto_vacuum {found['autoVacuum']})"
    )
    click.echo(
        f"  expiry     {found['dueExpirations']} due now, next {found['nextExpiry'] or 'none'}; "
        f"{found['purgePending']} awaiting purge"
    )
    click.echo(
        f"  protection {found['pinned']} pinned, {found['activeLeases']} active lease(s) over "
        f"{found['leasedDocuments']} document(s), {found['contextProtections']} context protection(s)"
    )


def print_document(doc: dict[str, Any]) -> None:
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


def print_results(response: dict[str, Any]) -> None:
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


def print_packet(found: dict[str, Any], what: str) -> None:
    items = found.get("records", found.get("items", []))
    from cwa.retrieve import render

    click.echo(render.packet(what, items, utc_now(), for_model=False))
    if found.get("omitted"):
        click.echo(f"\n({found['omitted']} more record(s) did not fit the budget)")


def print_recall(ctx: click.Context, result: dict[str, Any], project: str) -> None:
    from cwa.retrieve import render

    click.echo(render.recall_result(result, utc_now(), for_model=False))
    if result["status"] == "resolved" and not result["text"]:
        click.echo(dump_json(result.get("tableOfContents")))
    for side, locator in (result.get("continuation") or {}).items():
        click.echo(f"\n(continues {side}: {command_line(ctx, 'recall', *project_args(project), locator)})")


def print_decision(decision: dict[str, Any]) -> None:
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


def print_maintenance(result: dict[str, Any]) -> None:
    space = result["space"]
    click.echo(
        f"expired {result['expired']} (postponed {result['expiryPostponed']}), purged {result['purged']}; "
        f"leases deleted {result['leasesDeleted']}, protections {result['protectionsDeleted']}; "
        f"exposures tombstoned {result['exposuresTombstoned']}, deleted {result['exposuresDeleted']}; "
        f"hint records reclaimed {result['hintRecordsReclaimed']}"
    )
    if result["vectorsConverted"]:
        click.echo(f"converted {result['vectorsConverted']} vector(s) to int8")
    if result["chunksLookedAt"]:
        click.echo(f"deflated the chunks stored before schema 38: {result['chunksLookedAt']} looked at")
    if result["vectorsPacked"]:
        click.echo(f"packed the sign bits of {result['vectorsPacked']} vector(s) in blocks")
    if result["fullTextMergeSteps"]:
        click.echo(f"merged the full-text rows a stopped rebuild deleted: {result['fullTextMergeSteps']} step(s)")
    if result["termCountsKept"]:
        click.echo(f"kept the window counts of {result['termCountsKept']} common term(s)")
    if "embedded" in result:
        click.echo(f"embedded {result['embedded']} window(s); {result['embeddingPending']} still queued")
    click.echo(
        f"file {human_size(space['fileBytesBefore'])} -> {human_size(space['fileBytesAfter'])}"
        + (f" ({space['action']})" if space["action"] else "")
        + ("; more work left: run again" if result["more"] else "")
    )


def print_models(result: dict[str, Any]) -> None:
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
        + (
            f", {archive_part['refreshWindows']} long one(s) waiting for their other pieces"
            if archive_part["refreshWindows"]
            else ""
        )
    )
    if archive_part["model"]:
        used = archive_part["model"]
        click.echo(f"  uses     {used['variant']} ({used['fingerprint']})")
        click.echo(f"  graph    {used['weights']}" + ("" if used["built"] else " (built when a model first loads)"))
    verdict = archive_part["optimized"]
    if verdict:
        click.echo(
            f"  optimize {'accepted' if verdict['accepted'] else 'rejected'}: {verdict['speedup']}x, "
            f"mean cosine {verdict['meanCosine']} over {verdict['windows']} windows ({verdict['createdAt']})"
            + ("" if verdict["current"] else "; built for another model: run `cwa models optimize` again")
        )


def print_optimized(result: dict[str, Any]) -> None:
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


def demo_commands(ctx: click.Context, report: dict[str, Any]) -> dict[str, Any]:
    """The command lines that show each step of the demo again when typed: they name the demo's
    project (the CLI's default is the working directory's) and the archive when it is not the
    default one."""
    from cwa import demo as sample

    line = functools.partial(command_line, ctx)
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


def print_demo(ctx: click.Context, report: dict[str, Any]) -> None:
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
    print_status(report["status"])
    click.echo("\nOne stored document, with the byte coordinates of its messages:\n")
    print_document(report["example"])
    for command, response in zip(commands["searches"], report["searches"]):
        click.echo(f"\n$ {command}")
        print_results(response)
    click.echo(f"\n$ {commands['correction']}")
    print_results(report["correction"])
    click.echo(f"\n$ {commands['recall']}")
    print_recall(ctx, report["recall"], report["project"])
    click.echo("\nThe next day, preflight decides once per user message whether to add a hint:")
    for item, why in zip(report["preflight"], commands["why"]):
        diagnostics = item["diagnostics"]
        click.echo(f"\n> {item['text']}\n  [{diagnostics['outcome']}: {diagnostics['reason']}]")
        for line in item["modelVisibleText"].strip("\n").splitlines():
            click.echo(f"  {line}")
        click.echo(f"  (why: {why})")
    click.echo(f"\nLook inside with SQL:\n  {commands['sql']}")


def print_session_status(status: dict[str, Any]) -> None:
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


def message_preview(message: dict[str, Any]) -> str:
    from cwa.session.transcript import serialize

    _, text, _, _, _ = serialize(message, "message")
    label = "[hint] " if message.get("customType") == "cwa-hint" else ""
    flat = " ".join(text.split())
    return label + (flat[:100] + "…" if len(flat) > 100 else flat)
