"""`cwa config`: the effective settings and their sources; trusted project folders."""

from __future__ import annotations

import os
from pathlib import Path

import click
import orjson

from cwa import config
from cwa.cli.root import main
from cwa.cli.shared import json_option, print_answer
from cwa.config import working_project
from cwa.exits import dump_json, handles_errors


@main.group("config")
def config_group() -> None:
    """Show resolved settings, and which project folders are trusted."""


@config_group.command("show")
@click.option("--sources", is_flag=True, help="Also list every source and every rejected value.")
@json_option
@handles_errors
def config_show(sources: bool, as_json: bool) -> None:
    """Print every setting with the source it came from (for the current folder)."""
    settings = config.load_settings(working_project())
    if as_json:
        click.echo(dump_json(settings.to_json(with_sources=sources)))
        return
    for key, value in settings.values.items():
        click.echo(f"{key:<32} {orjson.dumps(value).decode():<12} ({settings.origins[key]})")
    if not sources:
        return
    click.echo(f"\nproject folder {working_project()} is {'trusted' if settings.trusted_project else 'not trusted'}")
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
    trusted = config.edit_trusted(folder or working_project(), add=True)
    print_answer(
        {"trustedProjects": trusted},
        as_json,
        lambda _: click.echo(f"trusted: {os.path.realpath(folder or working_project())}"),
    )


@config_group.command("untrust")
@click.argument("folder", required=False, type=click.Path(file_okay=False, path_type=Path))
@json_option
@handles_errors
def config_untrust(folder: Path | None, as_json: bool) -> None:
    """Stop reading FOLDER's project settings [default: the cwd]."""
    trusted = config.edit_trusted(folder or working_project(), add=False)
    print_answer(
        {"trustedProjects": trusted},
        as_json,
        lambda _: click.echo(f"no longer trusted: {os.path.realpath(folder or working_project())}"),
    )
