"""`cwa eval`: the hint gates ship with cwa; locomo, coding, long and perf come from the evaluation
package (eval/, `pip install -e ./eval`), registered through the `cwa.eval` entry points.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cwa.cli.root import main
from cwa.cli.shared import json_option
from cwa.exits import dump_json, handles_errors, negative_answer

ENTRY_POINTS = "cwa.eval"  # the evaluation package's commands (eval/pyproject.toml)
# What that package registers, named here so a plain install can say where a command comes from
# (tests/test_cli.py checks it against eval/pyproject.toml)
EVALUATION_COMMANDS = ("locomo", "coding", "long", "perf")
EVALUATION_PACKAGE = "it comes with the evaluation package: pip install -e ./eval (in a cwa checkout)"


def _registered() -> dict[str, Any]:
    from importlib.metadata import entry_points  # only when `cwa eval` runs: it is slow to import

    return {entry.name: entry for entry in entry_points(group=ENTRY_POINTS)}


class EvalGroup(click.Group):
    """`cwa eval`: its own commands, and those the evaluation package registers when installed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_registered()})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        found = super().get_command(ctx, name)
        if found is not None:
            return found
        entry = _registered().get(name)
        if entry is None and name in EVALUATION_COMMANDS:
            raise click.UsageError(f"cwa eval {name}: {EVALUATION_PACKAGE}", ctx)
        return entry.load() if entry is not None else None


@main.group("eval", cls=EvalGroup)
def eval_group() -> None:
    """Quality gates: the hint gates over the cases shipped with cwa, and (with the evaluation
    package) LoCoMo, synthetic coding sessions and performance at scale."""


@eval_group.command("hints")
@click.option(
    "--fixture",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Case file [default: the shipped cwa/hint_cases.json].",
)
@json_option
@handles_errors
def eval_hints(fixture, as_json) -> None:
    """Run the automatic-hint cases and check the gates (exit 1 when one fails).

    Each case gets its own temporary archive; the metrics are recomputed from what preflight
    returned: marker and snippet recall, false positives, leaked candidate-only terms, stale
    reveals, budget violations and unsafe tool hints.
    """
    from cwa.hint_gates import evaluate, load_fixture

    report = evaluate(load_fixture(fixture))
    if as_json:
        click.echo(dump_json(report))
    else:
        for name, value in report["metrics"].items():
            click.echo(f"{name:28} {value}")
        for gate in report["gates"]:
            click.echo(f"{'pass' if gate['passed'] else 'FAIL'}  {gate['metric']} {gate['rule']}")
        for miss in report["failures"]:
            share = "" if miss["probabilityShare"] is None else f", probability share {miss['probabilityShare']}"
            click.echo(
                f"  case {miss['case']}: expected {miss['expected']}, got {miss['outcome']} ({miss['reason']}{share})"
            )
    if not report["passed"]:
        negative_answer()
