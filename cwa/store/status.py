"""What the archive holds: counts and bytes, for `cwa status` and the `status` method."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw

from cwa.store import migrations
from cwa.store.chunk_packing import chunks_to_pack
from cwa.store.sqlfiles import queries
from cwa.store.vector_format import vectors_to_convert


def file_pages(conn: apsw.Connection) -> tuple[int, int]:
    """The bytes of the archive file's pages, and of those free (inside the file, reusable, until
    maintenance gives them back)."""
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages, free = (conn.execute(f"PRAGMA {name}").fetchone()[0] for name in ("page_count", "freelist_count"))
    return pages * size, free * size


def archive_status(conn: apsw.Connection, path: Path, project: str | None) -> dict[str, Any]:
    sql = queries("status")
    by_state = conn.execute(sql["documents_by_state"], (project,)).fetchall()
    projects, sessions, messages = conn.execute(sql["counts"], (project,)).fetchone()
    chunk_count, chunk_bytes = conn.execute(sql["chunk_totals"]).fetchone()
    file_bytes, free_bytes = file_pages(conn)
    wal = Path(f"{path}-wal")
    archive_id = conn.execute(sql["meta_value"], ("archive_id",)).fetchone()
    return {
        "path": str(path),
        "archiveId": archive_id[0] if archive_id else None,
        "schemaVersion": migrations.user_version(conn),
        "project": project,
        "projects": projects,
        "projectsHeld": [
            {"project": identity, "documents": count} for identity, count in conn.execute(sql["projects_held"])
        ],
        "sessions": sessions,
        "documents": {
            "total": sum(count for _, count, _ in by_state),
            "byState": {state: count for state, count, _ in by_state},
            "byKind": dict(conn.execute(sql["documents_by_kind"], (project,)).fetchall()),
            "byClass": dict(conn.execute(sql["documents_by_class"], (project,)).fetchall()),
        },
        "messages": messages,
        "chunks": chunk_count,
        "latestGeneration": conn.execute(sql["latest_generation"]).fetchone()[0],
        "vectorsToConvert": vectors_to_convert(conn),
        "chunksToPack": chunks_to_pack(conn),
        "bytes": {
            "logical": sum(size for _, _, size in by_state),
            "chunks": chunk_bytes,
            "file": file_bytes,
            "free": free_bytes,
            "wal": wal.stat().st_size if wal.exists() else 0,
        },
    }


# Where each table's pages count in `cwa status --archive`, its indexes' with it (sql/status.sql
# `table_bytes`): canonical text, derived indexes, vectors. Everything else (ledgers, schedule,
# small tables) is "other".
_CHUNK_TABLES = ("chunks", "document_chunks")
_VECTOR_PREFIXES = ("window_vector", "window_embeddings", "embedding_queue", "embedding_refresh")
_INDEX_PREFIXES = ("window_fts", "windows", "anchor", "message_cues", "index_")


def lifecycle_status(conn: apsw.Connection, now: str) -> dict[str, Any]:
    """Documents per class and state, where the bytes are, and what protects or awaits expiry."""
    sql = queries("status")
    classes: dict[str, dict[str, dict[str, int]]] = {}
    for retention_class, state, count, size in conn.execute(sql["documents_by_class_and_state"]):
        classes.setdefault(retention_class, {})[state] = {"documents": count, "bytes": size}
    shares = {"chunks": 0, "index": 0, "vectors": 0, "other": 0}
    for name, size in conn.execute(sql["table_bytes"]):
        if name in _CHUNK_TABLES:
            shares["chunks"] += size
        elif name.startswith(_VECTOR_PREFIXES):
            shares["vectors"] += size
        elif name.startswith(_INDEX_PREFIXES):
            shares["index"] += size
        else:
            shares["other"] += size
    _, free = file_pages(conn)
    pins, leases, leased, protections, due, next_due, purging = conn.execute(
        sql["lifecycle_counts"], {"now": now}
    ).fetchone()
    logical = conn.execute(sql["live_logical_bytes"]).fetchone()[0]
    return {
        "byClass": classes,
        "bytes": {"logical": logical, **shares, "free": free},
        "autoVacuum": {0: "none", 1: "full", 2: "incremental"}[conn.execute("PRAGMA auto_vacuum").fetchone()[0]],
        "dueExpirations": due,
        "nextExpiry": next_due,
        "pinned": pins,
        "activeLeases": leases,
        "leasedDocuments": leased,
        "contextProtections": protections,
        "purgePending": purging,
    }
