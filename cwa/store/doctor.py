"""`cwa doctor`: is this archive healthy, and what would make it so?

Each check reads only; `repair` (run by the api with the index handlers) fixes what derived data
can fix — canonical rows are never rewritten, and nothing is rebuilt while archived bytes are
damaged (derived rows would be rebuilt from the damage). A failed integrity check or damaged
canonical bytes are not repairable here: the report says so, and the file should be restored from
a copy (or salvaged with sqlite3's `.recover`).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Any

import apsw
import blake3
import orjson

from cwa import hook_failures, limits
from cwa.errors import ArchiveCorrupt
from cwa.store import checkpoint_parts, migrations
from cwa.store.connection import ARCHIVE_FILE_MODE, RESTORE_ADVICE
from cwa.store.payloads import unpacked
from cwa.store.reads import read_bytes
from cwa.store.sqlfiles import queries

SAMPLE = 64  # documents (and windows) whose bytes are checked against their digests
SHOWN = 10  # affected documents named in a report


def _check(name: str, ok: bool, detail: str, repairable: bool = False, **facts: Any) -> dict[str, Any]:
    return {"name": name, "ok": ok, "detail": detail, "repairable": repairable and not ok, **facts}


def integrity(path: Path) -> dict[str, Any]:
    """PRAGMA integrity_check (FTS5 included) from a connection of its own: one that has not read
    since another process rewrote the FTS5 index may report stale-cache corruption falsely."""
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            messages = [row[0] for row in conn.execute("PRAGMA integrity_check(20)")]
        finally:
            conn.close()
    except (apsw.CorruptError, apsw.NotADBError) as exc:  # too damaged even to be checked
        messages = [f"{type(exc).__name__}: {exc}"]
    ok = messages == ["ok"]
    return _check(
        "integrity",
        ok,
        "ok" if ok else f"{len(messages)} problem(s): {RESTORE_ADVICE}",
        problems=[] if ok else messages,
    )


def _digest_of(payload: bytes, byte_length: int, chunk_id: int) -> bytes | None:
    """The digest of the bytes a payload stores, or None when it cannot be inflated to them."""
    try:
        return blake3.blake3(unpacked(payload, byte_length, chunk_id)).digest()
    except ArchiveCorrupt:
        return None


def canonical_chunks(conn: apsw.Connection) -> dict[str, Any]:
    """Every chunk against its digest and length (one pass over the chunks), and every readable
    document's chunk ranges against its length: the bytes recall returns, all of them."""
    sql = queries("doctor")
    chunks = bad = 0
    damaged: list[int] = []
    for chunk_id, digest, byte_length, payload in conn.execute(sql["chunks_with_payload"]):
        chunks += 1
        if _digest_of(payload, byte_length, chunk_id) != digest:
            bad += 1
            damaged.append(chunk_id)
    holders = (
        [f"{d} v{v}" for d, v in conn.execute(sql["documents_of_chunks"], {"ids": orjson.dumps(damaged).decode()})]
        if damaged
        else []
    )
    broken = [f"{d} v{v}" for d, v in conn.execute(sql["broken_documents"])]
    affected = list(dict.fromkeys(holders + broken))
    ok = not damaged and not broken
    detail = (
        f"{chunks} chunk(s) match their digests; every readable document's ranges cover its bytes"
        if ok
        else f"{bad} of {chunks} chunk(s) differ from their digest, {len(broken)} document(s) with missing or "
        f"misplaced chunk ranges; {len(affected)} document(s) affected ({', '.join(affected[:SHOWN])}"
        f"{', …' if len(affected) > SHOWN else ''}): {RESTORE_ADVICE}"
    )
    return _check("canonical-chunks", ok, detail, chunks=chunks, badChunks=bad, documents=affected)


def schema(conn: apsw.Connection) -> dict[str, Any]:
    version, latest = migrations.user_version(conn), migrations.latest_version()
    return _check("schema", version == latest, f"version {version} of {latest}", version=version, latest=latest)


def _range_digest(conn: apsw.Connection, row: int, start: int, end: int) -> bytes | None:
    """The digest of a document's bytes [start, end), or None when a chunk of them cannot be inflated."""
    try:
        data, _ = read_bytes(conn, row, start, end)
    except ArchiveCorrupt:
        return None
    return blake3.blake3(data).digest()


def derived(conn: apsw.Connection, sample: int) -> list[dict[str, Any]]:
    """Derived indexes against canonical rows: counts, and a sample of byte digests."""
    sql = queries("doctor")
    indexable = conn.execute(sql["indexable_count"]).fetchone()[0]
    unindexed = conn.execute(sql["unindexed_count"]).fetchone()[0]
    queued = conn.execute(sql["queued_count"]).fetchone()[0]  # not yet indexed, and about to be
    no_windows = conn.execute(sql["without_windows"]).fetchone()[0]
    windows, counted, fts = conn.execute(sql["window_totals"]).fetchone()
    stale = len(conn.execute(queries("index")["stale_derived_documents"]).fetchall())
    bad_documents = []
    for row, document_id, version, byte_length, digest in conn.execute(
        sql["sample_documents"], {"limit": sample}
    ).fetchall():
        if _range_digest(conn, row, 0, byte_length) != digest:
            bad_documents.append(f"{document_id} v{version}")
    bad_windows = 0
    for row, start, end, content_hash in conn.execute(sql["sample_windows"], {"limit": sample}).fetchall():
        bad_windows += _range_digest(conn, row, start, end) != content_hash
    return [
        _check(
            "canonical-digests",
            not bad_documents,
            f"{min(sample, indexable)} sampled document(s) match their text digest"
            if not bad_documents
            else f"text differs from its digest: {', '.join(bad_documents[:SHOWN])}: {RESTORE_ADVICE}",
            documents=bad_documents,
        ),
        _check(
            "derived-index",
            unindexed == 0 and no_windows == 0 and stale == 0 and bad_windows == 0,
            f"{indexable} document(s) to index: {unindexed} never indexed, {queued} in the index queue, "
            f"{no_windows} without windows, {stale} holding rows they should not, "
            f"{bad_windows} sampled window(s) off their bytes",
            repairable=True,
            indexable=indexable,
            unindexed=unindexed,
            queued=queued,
            withoutWindows=no_windows,
            stale=stale,
            badWindows=bad_windows,
        ),
        _check(
            "window-counts",
            windows == counted == fts,
            f"{windows} windows, {counted} counted for BM25, {fts} BM25F rows",
            repairable=True,
            windows=windows,
            counted=counted,
            ftsRows=fts,
        ),
        window_ranges(conn),
    ]


def window_ranges(conn: apsw.Connection) -> dict[str, Any]:
    """Each project's kept window id range holds every window it has (search scores only those
    ids: a window outside would be lost to it); and how many ranges also hold other projects'
    windows (ids given before project blocks: searched correctly, more slowly)."""
    ranges = conn.execute(queries("doctor")["window_ranges"]).fetchall()
    narrow = [
        p
        for p, low, high, kept_low, kept_high, _ in ranges
        if kept_low is None or not kept_low <= low <= high <= kept_high
    ]
    shared = [project for project, *_, others in ranges if others > 0]
    detail = f"{len(ranges) - len(narrow)} of {len(ranges)} project(s) have every window within their range"
    if narrow:
        detail += f"; outside it (lost to search): {', '.join(narrow[:SHOWN])}"
    if shared:
        detail += f"; {len(shared)} range(s) also hold other projects' windows (`cwa index rebuild` separates them)"
    return _check("window-ranges", not narrow, detail, repairable=True, narrow=narrow[:SHOWN], shared=len(shared))


def checkpoints(conn: apsw.Connection) -> dict[str, Any]:
    orphans = checkpoint_parts.orphan_count(conn)
    pending = len(
        conn.execute(queries("checkpoints")["unindexed_parts"], {"root": None, "limit": limits.UNBOUNDED}).fetchall()
    )
    return _check(
        "checkpoint-parts",
        orphans == 0 and pending == 0,
        f"{orphans} orphan part(s) (a checkpoint killed before its root; never searchable), "
        f"{pending} part(s) of committed roots not indexed yet",
        repairable=True,
        orphans=orphans,
        unindexed=pending,
    )


def _archive_files(path: Path) -> list[Path]:
    return [f for f in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")) if f.exists()]


def permissions(path: Path) -> dict[str, Any]:
    """The archive's own files are private to their owner (cwa creates them 0600). The folder is
    not judged: it may be the user's own (cwa makes 0700 only the folders it creates)."""
    wrong = []
    for target in _archive_files(path):
        mode = stat.S_IMODE(target.stat().st_mode)
        if mode & ~ARCHIVE_FILE_MODE:  # more open than cwa makes it
            wrong.append(f"{target.name} is {mode:o}, wanted {ARCHIVE_FILE_MODE:o}")
    readable = os.access(path, os.R_OK | os.W_OK)
    return _check(
        "permissions",
        not wrong and readable,
        "; ".join(wrong)
        if wrong
        else ("private to its owner" if readable else "not readable and writable by this user"),
        repairable=bool(wrong),
        problems=wrong,
    )


def disk(path: Path, critical_mib: int) -> dict[str, Any]:
    free = shutil.disk_usage(path.parent).free
    headroom = free - critical_mib * (1 << 20)
    return _check(
        "disk",
        critical_mib <= 0 or headroom > 0,
        f"{free // (1 << 20)} MiB free, guard at {critical_mib} MiB"
        + ("" if critical_mib <= 0 or headroom > 0 else ": admission is refused (disk-low)"),
        freeBytes=free,
        criticalMebibytes=critical_mib,
    )


def hooks(path: Path) -> dict[str, Any]:
    """Failures the client hooks logged (they never fail their client): repaired by clearing the
    log once the cause is fixed."""
    failures = hook_failures.recent(path)
    latest = failures[-1] if failures else None
    detail = (
        f"{len(failures)} hook failure(s); latest {latest.get('at')} {latest.get('host')} {latest.get('event')}: "
        f"{latest.get('code')}: {str(latest.get('message'))[:200]}"
        if latest
        else "no hook failures logged"
    )
    return _check("hooks", not failures, detail, repairable=True, failures=failures[-SHOWN:])


def damaged_file(path: Path, critical_mib: int, error: BaseException) -> dict[str, Any]:
    """The report on an archive SQLite finds damaged before the checks could run (it would not
    open, or a check's read hit a bad page): what the file-level checks can still say."""
    cause = (getattr(error, "details", None) or {}).get("sqlite") or str(error)
    found = integrity(path)
    problems = list(dict.fromkeys([*found.get("problems", []), cause]))
    checks = [
        _check("integrity", False, f"the file is damaged ({cause[:200]}): {RESTORE_ADVICE}", problems=problems),
        permissions(path),
        disk(path, critical_mib),
    ]
    return {"healthy": False, "checks": checks, "repaired": [], "path": str(path), "damaged": True}


def diagnose(conn: apsw.Connection, path: Path, critical_mib: int, sample: int = SAMPLE) -> list[dict[str, Any]]:
    return [
        integrity(path),
        schema(conn),
        canonical_chunks(conn),
        *derived(conn, sample),
        checkpoints(conn),
        permissions(path),
        disk(path, critical_mib),
        hooks(path),
    ]


CANONICAL_CHECKS = ("integrity", "canonical-chunks", "canonical-digests")


def canonical_damage(checks: list[dict[str, Any]]) -> bool:
    """Whether the archived bytes themselves are damaged (then nothing derived is rebuilt)."""
    return any(not c["ok"] for c in checks if c["name"] in CANONICAL_CHECKS)


def fix_permissions(path: Path) -> None:
    for target in _archive_files(path):
        target.chmod(ARCHIVE_FILE_MODE)
