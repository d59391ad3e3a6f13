"""The index queue's worker: a child process of `cwa serve` that derives the rows of what the
session engine archived (cwa/store/index_queue.py), so no request waits on indexing.

A process rather than a thread: indexing is pure Python for the most part (tokenizing, anchors),
and a thread would hold the interpreter lock against the request being served. The child
runs at a lower priority on its own connection, is woken by a byte on its stdin (WAKE) after
each deferred admission, looks every POLL_SECONDS for what another process queued, and when its stdin
closes (serve ends) indexes what is left for up to SHUTDOWN_SECONDS before it exits.

Serve also writes a byte (ANSWERED) after every request it answers. Before taking the write lock
for a document (or a batch of small ones: cwa/store/index_queue.py), the worker waits until serve
has been quiet for QUIET_SECONDS (at most QUIET_WAIT_SECONDS): a host sends its next request
after a model call or a user's message, so the worker's transaction lands in that pause instead
of in front of the request. In the same pauses it copies the WAL into the archive file (a passive
checkpoint, which never blocks a writer), so that the commit of a request seldom finds the WAL
full and pays for that copy itself, and it deflates the chunks stored before migration 0038, a
batch a pause (cwa/store/chunk_packing.py).

`cwa import` queues what it archives too (`IndexAtEnd`), then indexes the queue at its end with
`index_all_queued`: a helper process (cwa/index/prepare_helper.py) reads each queued document
through a read-only connection and does its pure work (tokenizing, anchors, deflating) while this
process writes the rows of the documents before it, so the two cores share a history's indexing.
`cwa index rebuild` uses the same helper (`prepared_documents`). Both children, the worker and
the helper, run this cwa as a module (cwa/child_process.py).
"""

from __future__ import annotations

import itertools
import os
import select
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence

import apsw

from cwa.child_process import python_module
from cwa.index.handlers import default_handlers
from cwa.index.prepare_helper import Helper
from cwa.store import chunk_packing
from cwa.store.connection import open_connection
from cwa.store.derived import IndexHandler
from cwa.store.index_queue import (
    BATCH_DOCUMENTS,
    Prepared,
    Queued,
    by_row,
    index_prepared,
    index_queued,
    lag,
    prepare_queued,
    queued_documents,
)
from cwa.timestamps import utc_now

POLL_SECONDS = 1.0  # how often the worker looks for what another process queued
SHUTDOWN_SECONDS = 2.0  # the most it spends on what is left once serve closes its stdin
NICENESS = 5  # the request being served gets the CPU first
QUIET_SECONDS = 0.05  # serve is between requests once it has answered none for this long
QUIET_WAIT_SECONDS = 1.0  # the longest a document waits for that pause
PACK_PER_ROUND = 4 * chunk_packing.PACK_BATCH  # chunks stored before 0038 deflated between polls
WAKE, ANSWERED = b"w", b"."  # what serve writes: a document was queued; a request was answered


class IndexProcess:
    """The parent's handle on its worker: started with serve, woken per deferred admission,
    started again if it died, closed (and waited for) when serve ends."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.child: subprocess.Popen | None = None

    def start(self) -> IndexProcess:
        command, env = python_module("cwa.index.queue_worker", self.path)
        self.child = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        os.set_blocking(self.child.stdin.fileno(), False)
        return self

    def wake(self) -> None:
        """A document was queued: index it."""
        if self.child is None or self.child.poll() is not None:
            self.start()  # it died: a new one takes the queue from where the old one left it
        self._send(WAKE)

    def answered(self) -> None:
        """Serve answered a request (see the module doc)."""
        if self.child is not None:
            self._send(ANSWERED)

    def _send(self, byte: bytes) -> None:
        try:
            os.write(self.child.stdin.fileno(), byte)
        except (BlockingIOError, BrokenPipeError):
            pass  # it has bytes enough waiting, or it is gone and the next wake starts another

    def close(self) -> None:
        if self.child is None:
            return
        try:
            self.child.stdin.close()
        except OSError:
            pass
        try:
            self.child.wait(SHUTDOWN_SECONDS + 3)
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait()


def run(path: str) -> None:
    """The child: drain, wait for a wake-up or the poll, drain again; end when stdin closes."""
    try:
        os.nice(NICENESS)
    except OSError:
        pass
    conn = open_connection(path)
    handlers = default_handlers()
    serve = _Serve(sys.stdin.buffer.raw.fileno())
    try:
        while not serve.ended:
            _drain(conn, handlers, serve.quiet)
            _pack(conn, serve)
            _checkpoint(conn, serve.quiet)
            if not serve.ended:
                serve.wait_for_wake(POLL_SECONDS)
        _drain(conn, handlers, None, SHUTDOWN_SECONDS)
    finally:
        conn.close()


class _Serve:
    """What the worker hears from serve on its stdin: a byte per answered request, EOF at the end."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.ended = False
        self.last_heard = 0.0  # monotonic time of the last byte
        self.woken = False

    def wait(self, seconds: float) -> None:
        """Wait up to `seconds` for bytes, reading them all: when they came (`last_heard`), whether
        a wake-up was among them (`woken`), or the end (`ended`)."""
        readable, _, _ = select.select([self.fd], [], [], seconds)
        if not readable:
            return
        heard = os.read(self.fd, 4096)
        if not heard:
            self.ended = True
            return
        self.last_heard = time.monotonic()
        self.woken = self.woken or WAKE in heard

    def wait_for_wake(self, seconds: float) -> None:
        """Until a wake-up, the end, or `seconds` pass (answered requests alone do not wake it)."""
        deadline = time.monotonic() + seconds
        self.woken = False
        while not self.woken and not self.ended and time.monotonic() < deadline:
            self.wait(max(0.0, deadline - time.monotonic()))

    def quiet(self) -> None:
        """Return once serve has answered nothing for QUIET_SECONDS, or after QUIET_WAIT_SECONDS."""
        deadline = time.monotonic() + QUIET_WAIT_SECONDS
        self.wait(0)
        while not self.ended:
            now = time.monotonic()
            left = QUIET_SECONDS - (now - self.last_heard)
            if left <= 0 or now >= deadline:
                return
            self.wait(min(left, deadline - now))


def _drain(conn: apsw.Connection, handlers: tuple, before_lock=None, seconds: float | None = None) -> None:
    deadline = None if seconds is None else time.monotonic() + seconds
    while deadline is None or time.monotonic() < deadline:
        try:
            if not index_queued(conn, handlers, utc_now(), limit=BATCH_DOCUMENTS, before_lock=before_lock):
                return
        except (apsw.BusyError, apsw.FullError, apsw.IOError):
            return  # the documents stay queued: the next wake-up or poll tries again


def _pack(conn: apsw.Connection, serve: _Serve) -> None:
    """Deflate chunks stored before migration 0038, each batch in a pause of serve's."""

    def ended_after_pause() -> bool:
        serve.quiet()
        return serve.ended

    try:
        chunk_packing.pack_stored(conn, PACK_PER_ROUND, stopped=ended_after_pause)
    except (apsw.BusyError, apsw.FullError, apsw.IOError):
        pass  # the mark moved with each committed batch: the next round goes on from there


def _checkpoint(conn: apsw.Connection, before: Callable[[], None]) -> None:
    """Copy what the WAL holds into the file, after `before` (serve's pause). Nothing to copy costs
    a look at the WAL's header; a reader still using old frames only stops the copy short."""
    before()
    try:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    except (apsw.BusyError, apsw.FullError, apsw.IOError):
        pass  # the next pass, or a commit past WAL_CHECKPOINT_PAGES, copies it


class IndexAtEnd:
    """An index worker that is no process: what is admitted meanwhile waits in the index queue for
    `index_all_queued`, which the holder runs once it is done archiving (`cwa import`)."""

    def wake(self) -> None:
        pass


HELPER_MIN_DOCUMENTS = 64  # fewer: prepared here (starting a helper costs about 0.3 s)
HELPER_CHUNK = 8  # documents the helper prepares per exchange
HELPER_AHEAD = 64  # exchanges in flight (512 documents): how far the helper may run ahead of the writes
HELPER_READ = 1024  # queued documents read from the queue at a time
WRITE_SECONDS = 0.2  # the longest `index_all_queued` holds the write lock per batch (cf. cwa index rebuild)


def prepared_documents(
    conn: apsw.Connection,
    path: str | None,
    handlers: Sequence[IndexHandler],
    documents: Iterable[Queued],
    count: int,
    deflate: bool = True,
) -> Iterator[Prepared]:
    """Each document's pure work (`prepare_queued`, `deflate` as there), in order: by a helper process reading the
    archive at `path` when there are `count` >= HELPER_MIN_DOCUMENTS of them and `handlers`
    prepare as the default ones do, else (and for whatever a helper that fails leaves) here. The
    helper runs at most HELPER_AHEAD exchanges ahead of what the caller has taken."""
    documents = iter(documents)
    if path is not None and count >= HELPER_MIN_DOCUMENTS and _fits_helper(handlers):
        waiting: deque[list[Queued]] = deque()  # the chunks sent, not yet answered
        helper = None
        try:
            helper = Helper(path)
            while True:
                while len(waiting) < HELPER_AHEAD and (chunk := list(itertools.islice(documents, HELPER_CHUNK))):
                    helper.send(chunk, deflate)
                    waiting.append(chunk)
                if not waiting:
                    return
                found = helper.receive()
                waiting.popleft()
                yield from found
        except Exception:  # the helper's, of any kind (it could not start, failed, ended):
            pass  # what it had not handed over is prepared here, where a real fault shows again
        finally:
            if helper is not None:
                helper.close()  # also when the caller stops early
        documents = itertools.chain((d for chunk in waiting for d in chunk), documents)
    for queued in documents:
        yield prepare_queued(conn, handlers, queued, deflate)


def index_all_queued(
    conn: apsw.Connection,
    path: str,
    handlers: Sequence[IndexHandler],
    clock: Callable[[], str],
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Index every queued document (of any project), oldest first, a helper process preparing them
    while this one writes (`prepared_documents`); how many were indexed. A failure leaves what it
    did not reach queued: nothing is lost, nothing indexed twice (`index_prepared`).
    `progress(done, total)` after each batch."""
    total = lag(conn, clock())["documents"]
    queue = by_row(lambda after: queued_documents(conn, HELPER_READ, after=after))
    done, batch, began = 0, [], time.monotonic()
    for prepared in prepared_documents(conn, path, handlers, queue, total):
        batch.append(prepared)
        if time.monotonic() - began >= WRITE_SECONDS:
            done += index_prepared(conn, handlers, clock(), batch)
            batch, began = [], time.monotonic()
            if progress is not None:
                progress(min(done, total), total)
    if batch:
        done += index_prepared(conn, handlers, clock(), batch)
    done += index_queued(conn, handlers, clock())  # what was queued behind the reading (another process's)
    if progress is not None:
        progress(min(done, total), total)
    return done


def _fits_helper(handlers: Sequence[IndexHandler]) -> bool:
    """Whether the helper's default handlers prepare what each of `handlers` expects (same class
    for the same name); other handlers (a test's, an old schema's) prepare here."""
    default = {h.name: type(h) for h in default_handlers()}
    return all(default.get(h.name) is type(h) for h in handlers if hasattr(h, "prepare"))


if __name__ == "__main__":
    run(sys.argv[1])
