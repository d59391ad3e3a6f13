"""Where the archive lives when no `--db` names it (a leaf: the hook client reads it without
loading SQLite)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def builtin_archive(env: Mapping[str, str]) -> Path:
    """The default when neither CWA_DB nor XDG_DATA_HOME is set."""
    return Path(env.get("HOME") or Path.home()) / ".local" / "share" / "cwa" / "archive.db"


def default_archive_path(env: Mapping[str, str] | None = None) -> Path:
    """`CWA_DB`, else `$XDG_DATA_HOME/cwa/archive.db`, else `~/.local/share/cwa/archive.db`."""
    env = os.environ if env is None else env
    explicit = env.get("CWA_DB")
    if explicit:
        return Path(explicit).expanduser()
    data_home = env.get("XDG_DATA_HOME")
    return Path(data_home).expanduser() / "cwa" / "archive.db" if data_home else builtin_archive(env)
