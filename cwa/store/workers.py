"""Background work inside `cwa serve`: a daemon thread with its own connection to the archive.

A worker calls `begin(conn)` once its connection is open, then wakes every `interval` seconds and
calls `step(conn)`; a busy archive just skips a turn, and `step` returning False ends the worker
(nothing it could ever do). Requests never wait on it beyond one short transaction of its own.
"""

from __future__ import annotations

import threading

import apsw


class DaemonWorker:
    name = "cwa-worker"

    def __init__(self, path: str, interval: float) -> None:
        self.path, self.interval = path, interval
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        self.stop.set()
        self.thread.join(timeout)

    def begin(self, conn: apsw.Connection) -> None:
        """What to do once, as soon as the worker's connection is open (nothing by default)."""

    def step(self, conn: apsw.Connection) -> bool:  # pragma: no cover - subclasses define it
        raise NotImplementedError

    def _run(self) -> None:
        from cwa.store.connection import open_connection

        try:
            conn = open_connection(self.path)
        except Exception:  # the archive is unusable; requests will say why
            return
        try:
            try:
                self.begin(conn)
            except apsw.BusyError:
                pass
            while not self.stop.wait(self.interval):
                try:
                    if self.step(conn) is False:
                        return
                except apsw.BusyError:
                    continue
        finally:
            conn.close()
