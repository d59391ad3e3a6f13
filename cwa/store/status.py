"""What the archive holds: counts and bytes, for `cwa status` and the `status` method."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw

from cwa.store import migrations
from cwa.store.sqlfiles import queries


def archive_status(conn: apsw.Connection, path: Path, project: str | None) -> dict[str, Any]:
    sql = queries("status")
    by_state = conn.execute(sql["documents_by_state"], (project,)).fetchall()
    projects, sessions, messages = conn.execute(sql["counts"], (project,)).fetchone()
    chunk_count, chunk_bytes = conn.execute(sql["chunk_totals"]).fetchone()
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    page_count = conn.execute("PRAGMA page_count").fetchone()[0]
    free_pages = conn.execute("PRAGMA freelist_count").fetchone()[0]
    wal = Path(f"{path}-wal")
    archive_id = conn.execute(sql["meta_value"], ("archive_id",)).fetchone()
    return {
        "path": str(path),
        "archiveId": archive_id[0] if archive_id else None,
        "schemaVersion": migrations.user_version(conn),
        "project": project,
        "projects": projects,
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
        "bytes": {
            "logical": sum(size for _, _, size in by_state),
            "chunks": chunk_bytes,
            "file": page_size * page_count,
            "free": page_size * free_pages,
            "wal": wal.stat().st_size if wal.exists() else 0,
        },
    }
