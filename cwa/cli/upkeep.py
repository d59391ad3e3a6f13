"""Keeping the archive healthy: maintain, index, models, doctor, and the demo."""

from __future__ import annotations

from typing import Any

import click

from cwa import config, limits
from cwa.cli.formatters import (
    demo_commands,
    print_demo,
    print_maintenance,
    print_models,
    print_optimized,
)
from cwa.cli.root import main
from cwa.cli.shared import archive_command, json_option, open_archive, print_answer, progress_bar, run_method
from cwa.config import working_project
from cwa.errors import ArchiveCorrupt
from cwa.exits import dump_json, handles_errors, negative_answer


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
    run_method(ctx, "maintain", {"limit": limit, "vacuum": vacuum, "embed": embed}, as_json, print_maintenance)


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
        click.echo(
            f"rebuilt {result['documents']} document(s) in generation {result['generation']}; {outcomes}; "
            f"{result['fullTextMergeSteps']} full-text merging step(s); {result['termCountsKept']} common term(s) kept"
        )

    run_method(ctx, "index-rebuild", {}, as_json, show, progress="indexing")


@archive_command(index_group, "embed")
@click.option(
    "--limit",
    type=click.IntRange(1, limits.MAX_EMBED_WINDOWS),
    help="Embed at most this many windows [default: all queued].",
)
def index_embed(ctx, limit, as_json) -> None:
    """Embed the queued windows for semantic search (local model; progress bar)."""
    params = {"limit": limit} if limit else {}
    run_method(
        ctx,
        "index-embed",
        params,
        as_json,
        progress="embedding",
        show=lambda result: click.echo(
            f"embedded {result['embedded']} window(s); {result['pending']} pending; model {result['fingerprint']}"
            + (" (new model: every window was queued again)" if result["modelChanged"] else "")
            + (
                f"; {result['refreshed']} long window(s) given their other pieces, {result['refreshing']} to go"
                if result["refreshed"] or result["refreshing"]
                else ""
            )
        ),
    )


@main.group("models")
def models_group() -> None:
    """Local models (embedding, reranker): installed from packages, never downloaded at run time."""


@archive_command(models_group, "status")
def models_status(ctx, as_json) -> None:
    """What is installed, where, its fingerprint, and what the archive's vectors came from."""
    run_method(ctx, "models-status", {}, as_json, print_models)


@archive_command(
    models_group,
    "optimize",
    help=(
        "Measure the runtime embedding graph (int8 weights kept at run time, the default; built once per user "
        "from the installed model) against the packaged graph on the archive's windows. It stays in use for "
        f"this archive only if it is at least {limits.VARIANT_MIN_SPEEDUP}x faster with known-item recall not "
        f"lower and mean cosine >= {limits.VARIANT_MIN_COSINE}; otherwise the archive goes back to the packaged "
        "graph and its vectors are rebuilt in the background."
    ),
)
def models_optimize(ctx, as_json) -> None:
    run_method(ctx, "models-optimize", {}, as_json, print_optimized, progress="optimizing")


def _install(pinned_name: str, as_json: bool) -> None:
    from cwa import model_install
    from cwa.models import models_folder

    pinned = getattr(model_install, pinned_name)
    target = models_folder() / pinned.name
    if as_json:
        result = model_install.install(pinned, target)
        click.echo(dump_json(result))
        return
    with progress_bar(f"downloading {pinned.repo}") as progress:
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


@archive_command(main)
def demo(ctx: click.Context, as_json: bool) -> None:
    """Archive a small sample coding session and show what was stored.

    The sample has fixed ids and timestamps: running it again stores nothing new.
    """
    from cwa.demo import run_demo

    with open_archive(ctx) as archive:
        report = run_demo(archive)
    report["commands"] = demo_commands(ctx, report)
    print_answer(report, as_json, lambda found: print_demo(ctx, found))


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
        result = run_method(ctx, "doctor", params, as_json, show, progress="rebuilding" if repair else None)
    except ArchiveCorrupt as error:  # too damaged to open: still a report, with what to do
        from cwa.api import damaged_archive_report

        result = damaged_archive_report(ctx.obj["db"], config.load_settings(working_project()), error)
        print_answer(result, as_json, show)
    if not result["healthy"]:
        negative_answer()
