"""The `cwa` group itself: --db, --version, and the examples in `cwa --help`."""

from __future__ import annotations

from pathlib import Path

import click

from cwa import __version__


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
