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

`cwa import` and `Archive.admit_many` queue what they archive too (`IndexAtEnd`), in batches, and
a `QueueIndexer` indexes the queue: a helper process (cwa/index/prepare_helper.py) reads each
queued document through a read-only connection and does its pure work (tokenizing, anchors,
deflating) while the next batch is archived; this process writes the rows of what it prepared
between batches (`step`) and of what is left at the end (`finish`), so the two cores share a
history's indexing.
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
    started again if it died, closed (and waited for) when serve ends. A request waits on each
    admission, so the worker deflates the chunks, not the admission."""

    deflate_on_admission = False

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
    the holder's `QueueIndexer` (`cwa import`). No request waits on such an admission, so its
    chunks are deflated as they are stored, not rewritten deflated by the queue."""

    deflate_on_admission = True

    def wake(self) -> None:
        pass


HELPER_MIN_DOCUMENTS = 64  # fewer: prepared here (starting a helper costs about 0.3 s)
HELPER_CHUNK = 8  # documents the helper prepares per exchange
HELPER_AHEAD = 64  # exchanges in flight (512 documents): how far the helper may run ahead of the writes
HELPER_READ = 1024  # queued documents read from the queue at a time
WRITE_SECONDS = 0.2  # the longest `index_all_queued` holds the write lock per batch (cf. cwa index rebuild)


class Preparer:
    """Documents' pure work (`prepare_queued`, `deflate` as there), taken in the order given: by a
    helper process reading the archive at `path` once started (`start`; only when `handlers`
    prepare as the default ones do), else, and for whatever a failed helper leaves, here."""

    def __init__(
        self, conn: apsw.Connection, path: str | None, handlers: Sequence[IndexHandler], deflate: bool = True
    ) -> None:
        self.conn, self.handlers, self.deflate = conn, handlers, deflate
        self.path = path if path is not None and _fits_helper(handlers) else None
        self.helper: Helper | None = None
        self.waiting: deque[tuple[list[Queued], bool]] = deque()  # each chunk added, and whether the helper has it

    def start(self) -> None:
        if self.helper is None and self.path is not None:
            try:
                self.helper = Helper(self.path)
            except Exception:  # it could not start: everything is prepared here
                self.path = None

    def add(self, chunk: list[Queued]) -> None:
        sent = False
        if self.helper is not None:
            try:
                self.helper.send(chunk, self.deflate)
                sent = True
            except Exception:
                self._failed()
        self.waiting.append((chunk, sent))

    def ready(self) -> bool:
        """Whether the helper has answered for the oldest chunk (taking it would not wait)."""
        return bool(self.waiting) and self.waiting[0][1] and self.helper is not None and self.helper.ready()

    def take(self) -> list[Prepared]:
        """The oldest chunk's documents prepared."""
        chunk, sent = self.waiting.popleft()
        if sent and self.helper is not None:
            try:
                return self.helper.receive()
            except Exception:  # the helper's, of any kind (it failed, ended): what it had is prepared
                self._failed()  # here, where a real fault shows again
        return [prepare_queued(self.conn, self.handlers, queued, self.deflate) for queued in chunk]

    def _failed(self) -> None:
        self.close()
        self.path = None
        self.waiting = deque((chunk, False) for chunk, _ in self.waiting)

    def close(self) -> None:
        if self.helper is not None:
            self.helper.close()  # also when the caller stops early
            self.helper = None


def prepared_documents(
    conn: apsw.Connection,
    path: str | None,
    handlers: Sequence[IndexHandler],
    documents: Iterable[Queued],
    count: int,
    deflate: bool = True,
) -> Iterator[Prepared]:
    """Each document's pure work, in order (`Preparer`): by a helper process when there are
    `count` >= HELPER_MIN_DOCUMENTS of them, which runs at most HELPER_AHEAD exchanges ahead of
    what the caller has taken."""
    preparer = Preparer(conn, path if count >= HELPER_MIN_DOCUMENTS else None, handlers, deflate)
    documents = iter(documents)
    try:
        preparer.start()
        while True:
            while len(preparer.waiting) < HELPER_AHEAD and (chunk := list(itertools.islice(documents, HELPER_CHUNK))):
                preparer.add(chunk)
            if not preparer.waiting:
                return
            yield from preparer.take()
    finally:
        preparer.close()


class QueueIndexer:
    """Index every queued document (of any project), oldest first, a helper process preparing
    them while this process writes. A bulk admission (`Archive.admit_many`) calls `step` after
    each batch it commits, so the helper prepares what the batch queued while the next one is
    archived; `finish` indexes all that is left. A failure leaves what it did not reach queued:
    nothing is lost, nothing indexed twice (`index_prepared`)."""

    def __init__(
        self, conn: apsw.Connection, path: str, handlers: Sequence[IndexHandler], clock: Callable[[], str]
    ) -> None:
        self.conn, self.handlers, self.clock = conn, handlers, clock
        self.preparer = Preparer(conn, path, handlers)
        self.read: deque[Queued] = deque()  # read from the queue, not yet handed to the preparer
        self.after = 0  # the last queued row read
        self.done = 0

    def step(self, seconds: float) -> None:
        """Between a bulk admission's batches, for at most about `seconds`: once enough waits,
        start the helper; hand it what was queued since and write the documents it has prepared,
        never waiting for it."""
        if self.preparer.helper is None and lag(self.conn, self.clock())["documents"] >= HELPER_MIN_DOCUMENTS:
            self.preparer.start()
        if self.preparer.helper is None:
            return
        began = time.monotonic()
        self._hand_over()
        ready: list[Prepared] = []
        while self.preparer.ready() and time.monotonic() - began < seconds:
            ready += self.preparer.take()
            self._hand_over()  # the helper is kept busy while this process writes
            if len(ready) >= HELPER_CHUNK * HELPER_AHEAD // 4 or not self.preparer.ready():
                self.done += index_prepared(self.conn, self.handlers, self.clock(), ready)
                ready = []
        if ready:
            self.done += index_prepared(self.conn, self.handlers, self.clock(), ready)

    def finish(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Index everything still queued, writing a batch a transaction of about WRITE_SECONDS;
        how many documents this indexer indexed. `progress(done, total)` after each batch."""
        total = self.done + lag(self.conn, self.clock())["documents"]
        if total - self.done >= HELPER_MIN_DOCUMENTS:
            self.preparer.start()
        batch: list[Prepared] = []
        began = time.monotonic()
        try:
            while self._hand_over() or self.preparer.waiting:
                batch += self.preparer.take()
                if time.monotonic() - began >= WRITE_SECONDS:
                    self.done += index_prepared(self.conn, self.handlers, self.clock(), batch)
                    batch, began = [], time.monotonic()
                    if progress is not None:
                        progress(min(self.done, total), total)
            if batch:
                self.done += index_prepared(self.conn, self.handlers, self.clock(), batch)
        finally:
            self.preparer.close()
        self.done += index_queued(self.conn, self.handlers, self.clock())  # what another process queued behind
        if progress is not None:
            progress(min(self.done, total), total)
        return self.done

    def _hand_over(self) -> bool:
        """Hand the preparer what was queued past the last row it has, up to HELPER_AHEAD chunks
        in its hands; whether there was any."""
        handed = False
        while len(self.preparer.waiting) < HELPER_AHEAD:
            if not self.read:
                self.read.extend(queued_documents(self.conn, HELPER_READ, after=self.after))
                if not self.read:
                    break
                self.after = self.read[-1][0]
            self.preparer.add([self.read.popleft() for _ in range(min(HELPER_CHUNK, len(self.read)))])
            handed = True
        return handed


def index_all_queued(
    conn: apsw.Connection,
    path: str,
    handlers: Sequence[IndexHandler],
    clock: Callable[[], str],
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Index every queued document (of any project), oldest first, a helper process preparing
    them while this one writes (`QueueIndexer`); how many were indexed. `progress(done, total)`
    after each batch."""
    return QueueIndexer(conn, path, handlers, clock).finish(progress)


def _fits_helper(handlers: Sequence[IndexHandler]) -> bool:
    """Whether the helper's default handlers prepare what each of `handlers` expects (same class
    for the same name); other handlers (a test's, an old schema's) prepare here."""
    default = {h.name: type(h) for h in default_handlers()}
    return all(default.get(h.name) is type(h) for h in handlers if hasattr(h, "prepare"))


if __name__ == "__main__":
    run(sys.argv[1])
