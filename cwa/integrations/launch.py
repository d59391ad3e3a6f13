"""How a client starts cwa: this installation's Python running `-P -m cwa`, so it works without the
environment cwa was installed into being active (and `-P`: a client runs it in the user's project,
whose own `cwa` package must not shadow this one), and with `--db` naming the archive whenever it
is not the built-in default. Clients pass their servers and hooks a filtered environment (Codex,
the MCP Inspector), so a `CWA_DB` or `XDG_DATA_HOME` of the user's shell would not reach them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from cwa.archive_path import builtin_archive
from cwa.child_process import module_command


def _named(db: Path, env: Mapping[str, str]) -> list[str]:
    archive = os.path.abspath(db.expanduser())
    return [] if archive == os.path.abspath(builtin_archive(env)) else ["--db", archive]


def cwa_command(db: Path, env: Mapping[str, str], *args: str) -> list[str]:
    return module_command("cwa", *_named(db, env), *args)


def hook_command(db: Path, env: Mapping[str, str], host: str) -> list[str]:
    """What a client's hook runs: the light hook client (cwa/hook_client.py), not the CLI."""
    return module_command("cwa.hook_client", *_named(db, env), host)
