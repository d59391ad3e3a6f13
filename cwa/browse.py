"""`cwa browse`: the archive in a browser, read-only, through Datasette (optional extra
`cwa[browse]`); cwa writes no web server of its own.

Datasette opens the file with `?mode=ro` (it never writes a database it was not told is
mutable through a plugin), listens on 127.0.0.1 only and answers only requests addressed to a
loopback name (cwa/integrations/datasette/loopback_hosts.py: DNS rebinding gets 403), runs on a current SQLite (the extra brings
`pysqlite3-binary`: the archive's FTS5 table needs SQLite 3.43 or newer, and sqlite-vec must be
loadable), and gets cwa's metadata (the vector tables are hidden: vectors are not for reading): titles and descriptions of the documented views, facets, the
BM25F table for full-text search over windows, and the canned queries of `sql/browse.sql`.
Archived text is shown as text (Datasette escapes it). Where a question needs cwa's own logic
(exact text, recall, why), a column gives the CLI command.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cwa.errors import InvalidRequest, NotFound
from cwa.store.connection import open_connection, sqlite_vec_path
from cwa.store.sqlfiles import queries

DATABASE = "archive"  # the name Datasette shows (and puts in every URL)

VIEWS = {
    "document_overview": (
        "Documents",
        "Every document version: project, session, kind, retention class, "
        "state, pins, supersession. Exact text: `cwa get ID --text`.",
    ),
    "live_documents": ("Live documents", "The documents every search mode may return."),
    "document_messages": ("Messages", "Each archived message with its byte coordinates in its document."),
    "document_texts": (
        "Document texts",
        "The text of each document version, reassembled from its chunks (shown as text, never rendered).",
    ),
    "session_lineage": ("Session lineage", "Each session with its recorded parent."),
    "index_status": ("Index status", "Per document: which index handler ran, with what outcome."),
    "session_records": (
        "Session records",
        "Every message of every session in the order it was written (what gather and traverse return).",
    ),
}
FACETS = {
    "document_overview": ["project", "session_id", "kind", "retention_class", "state"],
    "live_documents": ["project", "session_id", "kind", "retention_class"],
    "session_records": ["project", "session_id", "kind", "role"],
}
QUERIES = {
    "sessions_by_date": ("Sessions by date", "Newest first, with documents, archived bytes and a token estimate."),
    "session_turns": (
        "One session's turns",
        "Every archived message of a session, in order (session id from "
        "Sessions by date); the last column prints a document's exact text.",
    ),
    "hints_shown": (
        "Hints shown",
        "What preflight decided per user message: outcome, reason, the exact "
        "bytes inserted (empty session: every session).",
    ),
    "rotated_and_externalized": (
        "Rotated and externalized",
        "Tool output previewed, duplicates marked and "
        "oversized input archived by the session engine (empty session: all).",
    ),
    "documents_due_to_expire": ("Due to expire", "Storage retention: what expires next."),
    "bytes_by_kind": ("Bytes by kind", "Documents and archived bytes per kind and state."),
}


def metadata() -> dict[str, Any]:
    """Datasette's metadata for an archive: titles, descriptions, facets, FTS, canned queries."""
    named = queries("browse")
    tables: dict[str, Any] = {
        name: {"title": title, "description": text, **({"facets": FACETS[name]} if name in FACETS else {})}
        for name, (title, text) in VIEWS.items()
    }
    for hidden in ("window_vectors", "window_vectors_float32", "window_vector_bits", "window_vector_blocks"):  # binary
        tables[hidden] = {"hidden": True}
    tables["windows"] = {
        "description": "BM25F windows of the documents; search uses the stemmed terms of window_fts.",
        "fts_table": "window_fts",
        "fts_pk": "id",
    }
    return {
        "title": "cwa archive",
        "description": "A read-only view of a cwa archive (docs/schema.md). Archived text is historical "
        "data, shown as text.",
        "databases": {
            DATABASE: {
                "tables": tables,
                "queries": {
                    name: {"sql": named[name], "title": title, "description": text}
                    for name, (title, text) in QUERIES.items()
                },
            }
        },
    }


# cwa's own Datasette plugins: requests must name a loopback host (DNS rebinding); the SQL functions cwa's
# views call (sql_functions.py); the search and hit pages
PLUGINS = Path(__file__).parent / "integrations" / "datasette"


def command(archive: Path, port: int, metadata_file: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "datasette",
        "serve",
        f"{archive}",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--metadata",
        str(metadata_file),
        "--load-extension",
        sqlite_vec_path(),
        "--plugins-dir",
        str(PLUGINS),
        "--template-dir",
        str(PLUGINS / "templates"),
        "--setting",
        "sql_time_limit_ms",
        "5000",
    ]


def prepare(archive: Path) -> Path:
    """Checks before starting: the extra is installed and the archive exists (browsing never
    creates one). Returns a Datasette-ready path (the archive, named `archive.db`)."""
    try:
        import datasette  # noqa: F401
        import pysqlite3  # noqa: F401  (Datasette uses it when present)
    except ImportError as missing:
        raise InvalidRequest(
            "cwa browse needs Datasette and a current SQLite: pip install 'cwa[browse]'",
            reason="missing-extra",
            module=str(missing.name),
        ) from missing
    if not archive.is_file():
        raise NotFound(
            f"there is no archive at {archive} yet: archive something first (cwa demo, or Pi with cwa pi install)",
            reason="no-archive",
            path=str(archive),
        )
    return archive


def serve(archive: Path, port: int, open_browser: bool) -> int:
    archive = prepare(archive)
    folder = Path(tempfile.mkdtemp(prefix="cwa-browse-"))
    try:
        # Datasette names a database after its file: a link with cwa's name keeps URLs stable
        link = folder / f"{DATABASE}.db"
        link.symlink_to(archive.resolve())
        meta = folder / "metadata.json"
        meta.write_text(json.dumps(metadata()), encoding="utf-8")
        args = command(link, port, meta) + (["--open"] if open_browser else [])
        # a connection of cwa's own stays open meanwhile: a WAL archive keeps its -wal and -shm
        # files, which Datasette's read-only connections need (they may not create them)
        holder = open_connection(archive)
        try:
            return _run_until_stopped(args)
        finally:
            holder.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run_until_stopped(args: list[str]) -> int:
    """Run Datasette; a signal that stops `cwa browse` (Ctrl-C, SIGTERM, SIGHUP) stops it too, so
    no server outlives the command."""
    child = subprocess.Popen(args)

    def forward(signum: int, _frame: Any) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    previous = {number: signal.signal(number, forward) for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        code = child.wait()
        return 0 if code in (-signal.SIGTERM, -signal.SIGINT, -signal.SIGHUP) else code
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
