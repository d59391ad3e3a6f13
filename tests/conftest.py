from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cwa.api import Archive
from cwa.models import cache_folder

REPO = Path(__file__).resolve().parent.parent

# The disk guard refuses admission below 2 GiB free by default; test machines may have less, and
# only the disk-guard tests are about it (they set the threshold themselves).
DISK_GUARD_OFF = {"CWA_DISK_CRITICAL_MEBIBYTES": "0"}
os.environ.update(DISK_GUARD_OFF)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "archive" / "archive.db"


@pytest.fixture
def archive(db_path: Path):
    with Archive.open(db_path) as opened:
        yield opened


def turn(text: str = "hello", session: str = "s1", project: str = "/work/p", **extra: Any) -> dict:
    """A small valid admit request."""
    request = {
        "project": project,
        "sessionId": session,
        "kind": "turn",
        "messages": [
            {"role": "user", "text": text},
            {"role": "assistant", "text": f"answer to: {text}"},
        ],
    }
    request.update(extra)
    return request


# Every derived row a document's indexing writes. The FTS5 tables are contentless (their columns
# read as NULL): their rows are compared term by term through an 'instance' vocabulary.
DERIVED = {
    "windows": "SELECT id, document_row, ordinal, start_byte, end_byte, term_count, content_hash FROM windows",
    "fts": "SELECT term, doc, col, offset FROM temp.window_instances",
    "anchors": "SELECT a.document_row, a.packed FROM anchors AS a",
    "texts": "SELECT id, text, folded, key FROM anchor_texts",
    "postings": "SELECT term, doc, col, offset FROM temp.posting_instances",
    "cues": "SELECT document_row, ordinal, cue, score FROM message_cues",
    "chunks": "SELECT id, hash, byte_length, data FROM chunks",
}


def derived_rows(db: Path) -> dict[str, list]:
    """The archive's DERIVED rows, each table's sorted, read without writing to the archive."""
    import apsw

    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.window_instances USING fts5vocab (main, window_fts, 'instance')")
        conn.execute("CREATE VIRTUAL TABLE temp.posting_instances USING fts5vocab (main, anchor_postings, 'instance')")
        return {name: sorted(conn.execute(sql).fetchall()) for name, sql in DERIVED.items()}
    finally:
        conn.close()


def hermetic_settings(folder: Path, **env: str):
    """Settings read from `folder` only (no user or Pi files), the disk guard off, `env` on top
    (CWA_* variables)."""
    from cwa.config import load_settings

    return load_settings(
        None, env={"HOME": str(folder), "XDG_CONFIG_HOME": str(folder / "cfg"), **DISK_GUARD_OFF, **env}
    )


def hermetic_env(tmp_path: Path, db: Path | None = None) -> dict[str, str]:
    """An environment whose config sources are all inside tmp_path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CWA_")} | DISK_GUARD_OFF
    env.update(
        HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "home" / ".config"),
        # the runtime embedding graph is built once per user: shared, so no test builds it again
        XDG_CACHE_HOME=str(cache_folder().parents[1]),
        PI_CODING_AGENT_DIR=str(tmp_path / "home" / ".pi" / "agent"),
    )
    if db is not None:
        env["CWA_DB"] = str(db)
    return env


def run_cwa(args: list[str], env: dict[str, str], stdin: bytes = b"", cwd: Path | None = None, timeout: float = 120):
    """Run the real `cwa` entry point in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "cwa", *args],
        input=stdin,
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def row_counts(db: Path) -> dict[str, int]:
    import apsw
    import sqlite_vec

    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())  # window_vectors is a vec0 table
    try:
        tables = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        ]
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    finally:
        conn.close()


def stop_hook_servers(folder: Path) -> None:
    """Kill the hook servers (cwa/capture/hook_server.py) of archives under `folder`: they outlive
    the hooks that started them (until 15 idle minutes), so a test ends them itself."""
    subprocess.run(["pkill", "-f", "--", f"--db {folder}.* hook-server"], check=False)
