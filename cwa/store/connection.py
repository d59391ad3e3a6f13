"""Opening the archive file: location, permissions, pragmas, sqlite-vec, migrations, views.

Many processes may open one archive at once (several Pi windows, the CLI, `cwa serve`): WAL
lets readers proceed while writers serialize on SQLite's lock, each write transaction starts
IMMEDIATE so it waits for the lock up front instead of failing on a read-to-write upgrade.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import apsw
import blake3

from cwa.archive_path import default_archive_path
from cwa.errors import (
    ArchiveCorrupt,
    ArchiveIncompatible,
    CwaError,
    Internal,
    StorageBusy,
    StorageUnavailable,
)
from cwa.store import anchor_lists, migrations, payloads
from cwa.store.sqlfiles import resource_dir
from cwa.store.transactions import roll_back

BUSY_TIMEOUT_MS = 10_000
BUSY_POLL_SECONDS = 0.005  # how often a waiting writer retries the lock
# Frames the WAL may hold before the committing writer copies them into the file (SQLite's default
# is 1,000). Each admission rewrites the same hot pages (index edges, FTS segments); a larger WAL
# copies each once per checkpoint and syncs the file an eighth as often: admission about 45%
# faster and its p95 17 ms → 3 ms (docs/performance.md). The WAL file grows to about 32 MiB. In
# `cwa serve` the index worker checkpoints in the pauses between requests (cwa/index/queue_worker.py).
WAL_CHECKPOINT_PAGES = 8192
# A savepoint keeps the pages its transaction had already changed before it (its statement journal)
# so it can roll them back; past 64 KiB SQLite spills that journal to a temporary file. Admission
# runs each index handler in a savepoint, so a document opened such a file about every other time
# (`python eval/perf/admission.py --files`). With temporary storage in memory the journal stays
# there (it holds what one handler changes). A full VACUUM copies the archive into temporary storage, so
# maintenance turns it back to files for that (cwa/store/maintenance.py). Set after the migrations,
# whose one-off statements may build large temporary tables.
TEMP_STORE = "MEMORY"
# A statement that joins tables and binds a parameter was prepared again on every run: SQLite's
# planner looked at the bound value and marked the statement to be planned again when it changed
# (the cached statement cost as much as a new one; `python eval/perf/prepared.py`). The query
# planner stability guarantee plans each statement once, for any value: cwa's statements never
# depend on a value for their plan (no LIKE with a bound pattern, no statistics from ANALYZE, no
# partial index chosen by a bound value; tests/test_schema.py checks the plans).
STABLE_PLANS = True
ARCHIVE_FILE_MODE = 0o600
ARCHIVE_DIR_MODE = 0o700


def storage_error(exc: BaseException, path: Path | str = "the archive") -> CwaError:
    """Map an SQLite/OS failure to the contract's error types."""
    if isinstance(exc, CwaError):
        return exc
    if isinstance(exc, (apsw.BusyError, apsw.LockedError)):
        return StorageBusy(
            f"{path} stayed locked by another writer for {BUSY_TIMEOUT_MS // 1000} s; try again",
            timeoutMs=BUSY_TIMEOUT_MS,
        )
    if isinstance(exc, apsw.CorruptError) or (isinstance(exc, apsw.NotADBError) and _sqlite_header(path)):
        return ArchiveCorrupt(f"{path} is damaged ({exc}): {RESTORE_ADVICE}", reason="corrupt", sqlite=str(exc))
    if isinstance(exc, apsw.NotADBError):
        return ArchiveIncompatible(f"{path} is not a readable cwa archive: {exc}")
    if isinstance(exc, apsw.FullError):
        return StorageUnavailable(f"the disk holding {path} is full", reason="disk-full")
    if isinstance(
        exc,
        (apsw.CantOpenError, apsw.IOError, apsw.ReadOnlyError, apsw.PermissionsError, OSError),
    ):
        return StorageUnavailable(f"cannot use {path}: {exc}", reason=type(exc).__name__)
    return Internal(f"unexpected storage failure: {type(exc).__name__}: {exc}")


# what cwa says whenever the archived bytes themselves are damaged (errors and doctor alike)
RESTORE_ADVICE = (
    "restore the archive from a copy (or salvage it with sqlite3's .recover); cwa cannot rebuild "
    "archived bytes, and rewrites nothing derived from them meanwhile"
)
SQLITE_MAGIC = b"SQLite format 3\x00"


def _sqlite_header(path: Path | str) -> bool:
    """Whether the file starts as an SQLite database does (then unreadable means damaged)."""
    try:
        with open(path, "rb") as file:
            return file.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def _prepare_location(path: Path) -> bool:
    """Create the directory (0700) and an empty file (0600) if missing; return True if new."""
    directory = path.parent
    if not directory.exists():
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(ARCHIVE_DIR_MODE)
    if path.is_dir():
        raise StorageUnavailable(f"{path} is a directory, not an archive file", reason="is-directory")
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, ARCHIVE_FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, ARCHIVE_FILE_MODE)  # os.open's mode is filtered by the umask
    finally:
        os.close(fd)
    return True


def _existing_schema_version(path: Path) -> int:
    """Read the schema version without writing anything, not even journal-mode changes."""
    probe = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        probe.set_busy_timeout(BUSY_TIMEOUT_MS)
        return migrations.user_version(probe)
    finally:
        probe.close()


@cache
def sqlite_vec_path() -> str:
    """sqlite-vec's loadable extension, found without importing the package: its module imports
    numpy (about 60 ms of every command's start), and only its `vec0` file is needed."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("sqlite-vec is not installed", name="sqlite_vec")
    return os.path.normpath(os.path.join(next(iter(spec.submodule_search_locations)), "vec0"))


def _load_sqlite_vec(conn: apsw.Connection) -> None:
    conn.enable_load_extension(True)
    try:
        conn.load_extension(sqlite_vec_path())
    finally:
        conn.enable_load_extension(False)


def _is_empty(conn: apsw.Connection) -> bool:
    return conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0] == 0


@cache
def _views_sql() -> tuple[str, str]:
    """sql/views.sql and its digest, read once per process."""
    text = (resource_dir("sql") / "views.sql").read_text(encoding="utf-8")
    return text, blake3.blake3(text.encode("utf-8")).hexdigest()


def _ensure_views(conn: apsw.Connection) -> None:
    """Recreate the inspection views when sql/views.sql differs from what the file holds."""
    text, digest = _views_sql()
    query = "SELECT value FROM meta WHERE key = 'views_digest'"
    row = conn.execute(query).fetchone()
    if row and row[0] == digest:
        return
    with write_transaction(conn):
        row = conn.execute(query).fetchone()
        if row and row[0] == digest:
            return
        conn.execute(text).fetchall()  # apsw runs a script lazily: drain every statement
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('views_digest', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (digest,),
        )


def open_connection(path: Path | str | None = None) -> apsw.Connection:
    """Open (creating if needed) the archive at `path` and bring its schema up to date."""
    path = Path(path).expanduser() if path is not None else default_archive_path()
    conn = _connect(path, apsw.SQLITE_OPEN_READWRITE, create=True)
    with _closed_on_failure(conn, path):
        wait_for_lock(conn, BUSY_TIMEOUT_MS)
        if _is_empty(conn):
            # Only possible before the first table exists; lets maintenance reclaim space later.
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
        conn.execute("PRAGMA foreign_keys = ON")
        _load_sqlite_vec(conn)
        migrations.apply_pending(conn, str(path), progress=_to_terminal())
        conn.execute(f"PRAGMA temp_store = {TEMP_STORE}")
        _ensure_views(conn)
    return conn


def _to_terminal() -> Callable[[str], None] | None:
    """Where a long upgrade reports: stderr when it is a terminal (a hook's or serve's stderr is
    read by programs, which get no such lines)."""
    if not sys.stderr.isatty():
        return None
    return lambda line: print(f"cwa: {line}", file=sys.stderr, flush=True)


def _connect(path: Path, flags: int, create: bool) -> apsw.Connection:
    """A connection to the archive at `path` (its folder and file made first when `create`),
    refused when a newer cwa wrote it; a storage failure typed."""
    try:
        if not (create and _prepare_location(path)):  # a file that existed: its schema is checked
            migrations.refuse_newer(_existing_schema_version(path), str(path))
        conn = apsw.Connection(str(path), flags=flags)
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, int(STABLE_PLANS))
        payloads.register(conn)  # the document_texts view inflates chunk payloads with it
        anchor_lists.register(conn)  # exact search reads an anchor's range in SQL with it
        return conn
    except (apsw.Error, OSError) as exc:
        raise storage_error(exc, path) from exc


@contextmanager
def _closed_on_failure(conn: apsw.Connection, path: Path) -> Iterator[None]:
    """Setting a new connection up: on any failure it is closed, a storage failure typed."""
    try:
        yield
    except BaseException as exc:
        conn.close()
        if isinstance(exc, (apsw.Error, OSError)):
            raise storage_error(exc, path) from exc
        raise


def open_read_only(path: Path | str) -> apsw.Connection:
    """An existing archive, for reading only (`cwa browse`'s pages): no schema change, no
    bookkeeping write (a lease, a feedback row is skipped: BOOKKEEPING_SKIPPED). Its schema must be
    one this cwa knows; an older one is upgraded by the next process that opens it to write."""
    path = Path(path)
    conn = _connect(path, apsw.SQLITE_OPEN_READONLY, create=False)
    with _closed_on_failure(conn, path):
        wait_for_lock(conn, BUSY_TIMEOUT_MS)
        _load_sqlite_vec(conn)
    return conn


@contextmanager
def write_transaction(conn: apsw.Connection) -> Iterator[None]:
    """One IMMEDIATE transaction: committed on success, rolled back on any exception (which is
    re-raised as it was, never replaced by a failed rollback). Inside a caller's transaction (a
    `BulkWrites` batch) it is a savepoint of it: all or nothing still, committed with the batch."""
    if conn.in_transaction:
        yield from _savepoint(conn)
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        roll_back(conn)
        raise
    try:
        conn.execute("COMMIT")
    except BaseException:
        roll_back(conn)
        raise


def _savepoint(conn: apsw.Connection) -> Iterator[None]:
    conn.execute("SAVEPOINT nested_write")
    try:
        yield
    except BaseException:
        if conn.in_transaction:  # SQLite may have rolled everything back itself (a full disk)
            conn.execute("ROLLBACK TO nested_write")
            conn.execute("RELEASE nested_write")
        raise
    conn.execute("RELEASE nested_write")


# Many small admissions (an import's turn documents, `admit_many`) are committed in batches of
# about this long: one commit each was a quarter of an import's time; a live host's write waits
# at most about this long for them.
BULK_SECONDS = 0.5
BULK_GAP_SECONDS = 2 * BUSY_POLL_SECONDS  # the lock left free between two batches


class BulkWrites:
    """Many small write transactions (an import's turn documents) folded into batches: one
    IMMEDIATE transaction committed whenever `due()` is called at least `seconds` after the
    batch began, and at the end; rolled back on an exception (what was committed stays). Other
    writers wait for at most about `seconds` plus the unit of work in progress. `committed` runs
    after each commit `due()` makes, inside the next batch's transaction (a bulk admission
    indexes there what the helper prepared: cwa/index/queue_worker.py `QueueIndexer`)."""

    def __init__(self, conn: apsw.Connection, seconds: float, committed: Callable[[], None] | None = None) -> None:
        self.conn, self.seconds, self.committed = conn, seconds, committed
        self.began = 0.0

    def __enter__(self) -> BulkWrites:
        self._begin()
        return self

    def _begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.began = time.monotonic()

    def due(self) -> None:
        """Commit the batch (and begin the next) once it is `seconds` old. Between the two, the
        lock is left free for BULK_GAP_SECONDS: a writer waiting for it retries every
        BUSY_POLL_SECONDS, and the next BEGIN would otherwise take it back at once (a live host's
        write beside an import could wait for many batches)."""
        if time.monotonic() - self.began >= self.seconds:
            self.conn.execute("COMMIT")
            time.sleep(BULK_GAP_SECONDS)
            self._begin()
            if self.committed is not None:
                self.committed()

    def __exit__(self, kind: object, *rest: object) -> None:
        if kind is None:
            self.conn.execute("COMMIT")
        else:
            roll_back(self.conn)


BATCH_GAP_SECONDS = 0.03  # after each batch of a background conversion: a gap for writers polling the lock


def in_short_transactions(
    conn: apsw.Connection,
    budget: int,
    batch: int,
    step: Callable[[apsw.Connection, int], int],
    left: Callable[[apsw.Connection], int],
    stopped: Callable[[], bool] = lambda: False,
) -> int:
    """A background conversion (vectors to int8, chunks deflated, a rebuild's FTS5 merges caught
    up): `step(conn, limit)` in its own short write transaction, up to `batch` items each, with a
    gap after it for other writers, until `budget` items are done, `left(conn)` says none is
    left, `stopped()`, or a step does nothing; how many. With none left it only reads: no write
    lock is taken, and `stopped` is not asked (serve's index worker waits for a pause there)."""
    done = 0
    while done < budget and left(conn) and not stopped():
        with write_transaction(conn):
            did = step(conn, min(batch, budget - done))
        if did == 0:
            break
        done += did
        time.sleep(BATCH_GAP_SECONDS)
    return done


BRIEF_WAIT_MS = 250  # the most a read waits for its own bookkeeping write (a lease, a feedback row)
# What a read's optional bookkeeping write may meet and skip: a long writer, a read-only file, a full disk
BOOKKEEPING_SKIPPED = (apsw.BusyError, apsw.ReadOnlyError, apsw.FullError)


def wait_for_lock(conn: apsw.Connection, milliseconds: int) -> None:
    """Retry a busy lock every BUSY_POLL_SECONDS for up to `milliseconds` (then BusyError).

    SQLite's own busy timeout backs off to 100 ms sleeps, so a waiter keeps missing the short
    gaps long work leaves between its batches (it is not a fair queue); polling often, a waiter
    gets the lock in the first gap."""
    limit = milliseconds / 1000
    since = [0.0]

    def retry(attempts: int) -> bool:
        now = time.monotonic()
        if attempts == 0:  # the first retry of this lock
            since[0] = now
        if now - since[0] >= limit:
            return False
        time.sleep(BUSY_POLL_SECONDS)
        return True

    conn.set_busy_handler(retry)


@contextmanager
def brief_wait(conn: apsw.Connection, milliseconds: int = BRIEF_WAIT_MS) -> Iterator[None]:
    """Writes inside wait at most `milliseconds` for another writer's lock (then BusyError), so
    the optional bookkeeping of a read never stalls the read behind a long writer."""
    wait_for_lock(conn, milliseconds)
    try:
        yield
    finally:
        wait_for_lock(conn, BUSY_TIMEOUT_MS)


@contextmanager
def durable_writes(conn: apsw.Connection) -> Iterator[None]:
    """synchronous=FULL for the writes inside: an oversized input is not sent again, so its
    archive must survive a power loss as soon as it is acknowledged."""
    conn.execute("PRAGMA synchronous = FULL")
    try:
        yield
    finally:
        conn.execute("PRAGMA synchronous = NORMAL")
