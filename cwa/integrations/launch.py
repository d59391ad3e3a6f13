"""How a client starts cwa: this installation's Python running `-m cwa`, so it works without the
environment cwa was installed into being active, and with `--db` naming the archive whenever it
is not the built-in default. Clients pass their servers and hooks a filtered environment (Codex,
the MCP Inspector), so a `CWA_DB` or `XDG_DATA_HOME` of the user's shell would not reach them."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path


def builtin_archive(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home()) / ".local" / "share" / "cwa" / "archive.db"


def cwa_command(db: Path, env: Mapping[str, str], *args: str) -> list[str]:
    archive = os.path.abspath(db.expanduser())
    named = [] if archive == os.path.abspath(builtin_archive(env)) else ["--db", archive]
    return [sys.executable, "-m", "cwa", *named, *args]
