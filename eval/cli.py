"""The `cwa eval` commands of the evaluation package: locomo, coding, long, perf (registered on
cwa's `eval` group through the `cwa.eval` entry points of eval/pyproject.toml).
"""

from __future__ import annotations

from pathlib import Path

import click

from cwa.cli.shared import json_option, print_answer, progress_bar
from cwa.errors import InvalidRequest
from cwa.exits import handles_errors


@click.command("locomo")
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
    help="Train the fold rankers on the synthetic coding facts and long coding histories too, as the shipped "
    "ranker is (about four minutes more).",
)
@click.option(
    "--haystack",
    type=click.IntRange(1_000, 10_000_000),
    default=None,
    help="Grow each conversation's project to about TOKENS tokens with distractors (other conversations' "
    "turns, then coding sessions with long answers and tool output); the floor indexes them too.",
)
@json_option
@handles_errors
def eval_locomo(data, modes, embedding, coding_training, haystack, as_json) -> None:
    """Turn-level retrieval on LoCoMo through the public search: R@1/5/10, hit@k, nDCG@10 and
    session recall, overall and per category, for each mode (a temporary archive; embedding
    shows a progress bar). The learned ranker is trained per fold of conversations and each
    conversation is scored by the fold that did not see it; preflight's "Remind me" snippets are
    measured the same way."""
    from cwa_eval.retrieval.locomo import load, print_report, run

    chosen = _modes(modes)
    load(data)  # a file that is not LoCoMo is refused before any work
    with progress_bar("embedding") as progress:
        report = run(data, chosen, None if as_json else progress, embedding, coding_training, haystack)
    print_answer(report, as_json, print_report)


def _modes(modes: str) -> list[str]:
    """The comma-separated modes of `cwa eval locomo | long`, each known, at least one."""
    from cwa_eval.retrieval.locomo import FLOOR, MODES

    chosen = [m.strip() for m in modes.split(",") if m.strip()]
    known = (FLOOR, *MODES)
    unknown = sorted(set(chosen) - set(known))
    if unknown or not chosen:
        raise InvalidRequest(
            f"unknown mode(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(known)}",
            field="modes",
            reason="unknown-mode",
        )
    return chosen


@click.command("coding")
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
    from cwa_eval.retrieval.coding import print_report, run

    report = run(documents, facts, seed)
    print_answer(report, as_json, print_report)


@click.command("long")
@click.option(
    "--tokens",
    "sizes",
    default="100000",
    show_default=True,
    help="Comma-separated history sizes in tokens (characters / 4), e.g. 100000,500000,1000000.",
)
@click.option(
    "--histories",
    type=click.IntRange(1, 100),
    default=4,
    show_default=True,
    help="Histories per size, a project each.",
)
@click.option(
    "--facts-per-kind",
    type=click.IntRange(1, 10),
    default=4,
    show_default=True,
    help="Facts planted per kind (update, fix, temporal, preference, value, instruction) in each history.",
)
@click.option(
    "--modes",
    default="fts5,lexical,hybrid",
    show_default=True,
    help="Comma-separated: fts5 (the floor) and search modes of `cwa eval locomo` (hybrid embeds every window first).",
)
@click.option("--seed", type=int, default=41, show_default=True, help="Generator seed (history i uses seed + i).")
@click.option(
    "--inside/--alone",
    default=False,
    show_default=True,
    help="Plant each fact inside a long message of its role (an answer of several paragraphs, a "
    "request with detail, a tool's output among others) rather than as a message of its own.",
)
@click.option(
    "--echo/--no-echo",
    default=False,
    show_default=True,
    help='The assistant\'s reply to a planted user statement restates it ("Got it: you prefer …"), as chat '
    "assistants do; the evidence stays the user's message.",
)
@json_option
@handles_errors
def eval_long(sizes, histories, facts_per_kind, modes, seed, inside, echo, as_json) -> None:
    """Recall on long synthetic coding histories with planted facts asked in other words (a
    choice later reversed, an error and its fix, a preference, a setting, an instruction): R@1/5/10
    by kind against the bare FTS5 floor in the same run, and preflight's hints and silences."""
    from cwa_eval.retrieval.long_recall import print_report, run

    chosen = _modes(modes)
    try:
        tokens = [int(s.replace("_", "")) for s in sizes.split(",") if s.strip()]
    except ValueError:
        tokens = []
    if not tokens or any(not 1_000 <= t <= 10_000_000 for t in tokens):
        raise InvalidRequest(
            f"--tokens takes sizes from 1000 to 10000000, comma-separated (got {sizes!r})",
            field="tokens",
            reason="bad-size",
        )
    with progress_bar("embedding") as progress:
        report = run(tokens, histories, facts_per_kind, chosen, seed, None if as_json else progress, inside, echo)
    print_answer(report, as_json, print_report)


@click.command("perf")
@click.option(
    "--sizes",
    default="10000",
    show_default=True,
    help="Comma-separated window counts, e.g. 10000,100000,1000000 (larger sizes take long: about "
    "35 minutes for 1M on two cores).",
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
    "vectors, one a piece as the model would embed each, which cost the vector scan the same.",
)
@click.option(
    "--keep",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep each measured archive in this folder as CORPUS-SIZE.db (deleted otherwise).",
)
@click.option(
    "--bulk",
    is_flag=True,
    help="Build each archive with `Archive.admit_many` (as `cwa import` and `cwa admit` with JSON "
    "lines archive: first in batches, then indexed with a helper process) instead of one `admit` "
    "call a document.",
)
@json_option
@handles_errors
def eval_perf(sizes, corpora, count, embed_sample, keep, bulk, as_json) -> None:
    """Admission, search, preflight, recall and gather cost, archive bytes by kind, serve RSS
    and cold start at each size, against a bare-FTS5 floor of the same texts (temporary
    archives; docs/performance.md)."""
    from cwa_eval.perf.scale import CORPORA, print_report, run

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
    report = run(chosen_sizes, chosen, count, embed_sample, say, keep, bulk)
    print_answer(report, as_json, print_report)
