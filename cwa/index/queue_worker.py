"""The index queue's worker: a child process of `cwa serve` that derives the rows of what the
session engine archived (cwa/store/index_queue.py), so no request waits on indexing.

A process rather than a thread: indexing is pure Python for the most part (tokenizing, anchors),
and a thread would hold the interpreter lock against the request being served. The child
runs at a lower priority on its own connection, is woken by a byte on its stdin after each
deferred admission, looks every POLL_SECONDS for what another process queued, and when its stdin
closes (serve ends) indexes what is left for up to SHUTDOWN_SECONDS before it exits.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

import apsw

from cwa.index.handlers import default_handlers
from cwa.store.connection import open_connection
from cwa.store.index_queue import index_queued
from cwa.timestamps import utc_now

POLL_SECONDS = 1.0  # how often the worker looks for what another process queued
SHUTDOWN_SECONDS = 2.0  # the most it spends on what is left once serve closes its stdin
NICENESS = 5  # the request being served gets the CPU first


class IndexProcess:
    """The parent's handle on its worker: started with serve, woken per deferred admission,
    started again if it died, closed (and waited for) when serve ends."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.child: subprocess.Popen | None = None

    def start(self) -> IndexProcess:
        self.child = subprocess.Popen(
            [sys.executable, "-m", "cwa.index.queue_worker", self.path],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.set_blocking(self.child.stdin.fileno(), False)
        return self

    def wake(self) -> None:
        if self.child is None or self.child.poll() is not None:
            self.start()  # it died: a new one takes the queue from where the old one left it
        try:
            os.write(self.child.stdin.fileno(), b"\n")
        except (BlockingIOError, BrokenPipeError):
            pass  # it has wake-ups enough waiting, or it is gone and the next wake starts another

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
    stdin = sys.stdin.buffer.raw
    try:
        while True:
            _drain(conn, handlers)
            readable, _, _ = select.select([stdin], [], [], POLL_SECONDS)
            if readable and not os.read(stdin.fileno(), 4096):  # serve ended
                _drain(conn, handlers, SHUTDOWN_SECONDS)
                return
    finally:
        conn.close()


def _drain(conn: apsw.Connection, handlers: tuple, seconds: float | None = None) -> None:
    deadline = None if seconds is None else time.monotonic() + seconds
    while deadline is None or time.monotonic() < deadline:
        try:
            if not index_queued(conn, handlers, utc_now(), limit=1):
                return
        except (apsw.BusyError, apsw.FullError, apsw.IOError):
            return  # the documents stay queued: the next wake-up or poll tries again


if __name__ == "__main__":
    run(sys.argv[1])
