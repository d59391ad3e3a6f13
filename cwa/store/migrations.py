"""Ordered schema migrations, tracked by PRAGMA user_version.

`migrations/NNNN_name.sql` files are applied in number order, each in its own IMMEDIATE
transaction, re-checking the version inside it so that two processes opening a new file at once
apply each migration exactly once. Applied migrations are never edited; a change is a new file.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import apsw

from cwa.errors import ArchiveIncompatible
from cwa.store import anchor_keys, anchor_lists
from cwa.store.sqlfiles import resource_dir
from cwa.store.transactions import roll_back

_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    number: int
    name: str
    path: Path


@cache
def available() -> tuple[Migration, ...]:
    found = []
    for path in resource_dir("migrations").glob("*.sql"):
        match = _FILE_NAME.match(path.name)
        if not match:
            raise ValueError(f"migration file name {path.name!r} is not NNNN_name.sql")
        found.append(Migration(int(match.group(1)), match.group(2), path))
    found.sort(key=lambda m: m.number)
    numbers = [m.number for m in found]
    if numbers != list(range(1, len(found) + 1)):
        raise ValueError(f"migrations must be numbered 1..N without gaps, found {numbers}")
    return tuple(found)


def latest_version() -> int:
    return len(available())


def user_version(conn: apsw.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


def refuse_newer(version: int, where: str) -> None:
    if version > latest_version():
        raise ArchiveIncompatible(
            f"{where} was written by a newer cwa (schema {version}; this version knows up to "
            f"{latest_version()}). Upgrade cwa to open it; nothing was changed.",
            schemaVersion=version,
            supportedVersion=latest_version(),
        )


# A migration that rewrites a large archive can take minutes (0017, 0024: 2.5 minutes at a million
# documents); after PROGRESS_AFTER seconds, `progress` is told which one runs and for how long,
# every PROGRESS_EVERY seconds (SQLite's progress handler, every PROGRESS_STEPS VM steps).
PROGRESS_AFTER = 2.0
PROGRESS_EVERY = 5.0
PROGRESS_STEPS = 200_000


def apply_pending(
    conn: apsw.Connection,
    where: str,
    target: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[int]:
    """Apply every migration newer than the file's version, up to `target` (default: the latest);
    return the numbers applied. Tests stop early to build an archive as an older cwa wrote it.
    `progress` hears of a migration still running after PROGRESS_AFTER seconds."""
    applied = []
    for migration in available():
        if user_version(conn) >= migration.number or (target is not None and migration.number > target):
            continue
        if not applied:  # only a connection that migrates needs them: 0041 keys the anchor
            anchor_keys.register(conn)  # dictionary, 0042 packs each document's anchors
            anchor_lists.register(conn)
        sql = migration.path.read_text(encoding="utf-8")
        with _foreign_keys_off(conn, sql):
            conn.execute("BEGIN IMMEDIATE")
            try:
                current = user_version(conn)
                refuse_newer(current, where)
                if current < migration.number:
                    with _reporting(conn, migration, where, progress):
                        conn.execute(sql).fetchall()  # apsw runs a script lazily: drain every statement
                    _check_rebuilt(conn, sql)
                    conn.execute(f"PRAGMA user_version = {migration.number:d}")
                    applied.append(migration.number)
            except BaseException:
                roll_back(conn)
                raise
            conn.execute("COMMIT")
    return applied


# A migration that makes a table others refer to again (SQLite's way to change what ALTER TABLE
# cannot: make a new table, copy, drop the old, rename the new) holds this line: it runs
# with foreign keys off, since dropping the old table would otherwise count every row that refers
# to it as a violation, and before it commits the rebuilt table's own references are checked.
REBUILDS = re.compile(r"^-- cwa: rebuilds ([a-z_]+)$", re.M)


@contextmanager
def _foreign_keys_off(conn: apsw.Connection, sql: str) -> Iterator[None]:
    """Foreign keys off around a rebuilding migration (the pragma is a no-op inside a
    transaction, so it is set before BEGIN), and as they were afterwards, whatever happens."""
    if not REBUILDS.search(sql):
        yield
        return
    enforced = conn.execute("PRAGMA foreign_keys").fetchone()[0]
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA foreign_keys = {int(enforced)}")


def _check_rebuilt(conn: apsw.Connection, sql: str) -> None:
    """Each rebuilt table's references still resolve (rows are copied with their ids, so the rows
    that refer to it are untouched); a violation rolls the migration back."""
    for table in REBUILDS.findall(sql):
        broken = conn.execute(f"PRAGMA foreign_key_check({table})").fetchone()
        if broken:
            raise apsw.ConstraintError(f"migration left {table} with a broken reference: {broken}")


@contextmanager
def _reporting(
    conn: apsw.Connection, migration: Migration, where: str, progress: Callable[[str], None] | None
) -> Iterator[None]:
    """Tell `progress` every PROGRESS_EVERY seconds, once the migration has run PROGRESS_AFTER."""
    if progress is None:
        yield
        return
    started = time.monotonic()
    due = started + PROGRESS_AFTER

    def tick() -> bool:
        nonlocal due
        now = time.monotonic()
        if now >= due:
            due = now + PROGRESS_EVERY
            progress(
                f"upgrading {where} to schema {migration.number} ({migration.name.replace('_', ' ')}): "
                f"{now - started:.0f} s so far; if stopped, the next open starts it again"
            )
        return False  # True would abort the migration

    conn.set_progress_handler(tick, PROGRESS_STEPS)
    try:
        yield
    finally:
        conn.set_progress_handler(None)
