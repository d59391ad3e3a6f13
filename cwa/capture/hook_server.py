"""The hook server: one process per archive that answers the client hooks while they come, so a
hook costs a connection instead of loading cwa (about 0.35 s) every time.

`cwa/hook_client.py` starts it on the first event it cannot deliver, and it exits after
IDLE_SECONDS without one. It listens on a Unix socket private to its user (hook_client.socket_path)
and takes one request per connection, `{"host", "event", "env"}` as a JSON line, answered by
`{"answer": …}`; requests are served one at a time on one archive connection. A file lock makes
it the only server of its archive. When the file at the archive's path is no longer the one it
opened (replaced, restored from a copy), it opens it again: it always serves the file the hooks
name. Every failure is logged beside the archive (cwa/hook_failures.py) and answered with nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from cwa import limits
from cwa.capture import hooks
from cwa.hook_client import FORWARDED
from cwa.index.queue_worker import IndexProcess

IDLE_SECONDS = 15 * 60


class _Archive:
    """The archive at `db`, opened again when the file at that path changes, with an index worker
    of its own: what a hook archives is indexed after the hook is answered (index_queue.py)."""

    def __init__(self, db: Path, open_archive: Callable[[], Any]) -> None:
        self.db, self.open_archive = db, open_archive
        self.archive: Any = None
        self.identity: tuple[int, int] | None = None

    def __call__(self) -> Any:
        stat = os.stat(self.db) if self.db.exists() else None
        identity = (stat.st_dev, stat.st_ino) if stat else None
        if self.archive is None or identity != self.identity:
            self.close()
            self.archive = self.open_archive()
            self.archive.index_worker = IndexProcess(str(self.archive.path)).start()
            found = os.stat(self.db)
            self.identity = (found.st_dev, found.st_ino)
        return self.archive

    def close(self) -> None:
        if self.archive is not None:
            worker, self.archive.index_worker = self.archive.index_worker, None
            with contextlib.suppress(Exception):
                worker.close()  # it indexes what is left, briefly; the next process the rest
            with contextlib.suppress(Exception):
                self.archive.close()
            self.archive = None


def _read_request(conn: socket.socket) -> dict[str, Any]:
    chunks, size = [], 0
    while not chunks or not chunks[-1].endswith(b"\n"):
        chunk = conn.recv(1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limits.MAX_REQUEST_BYTES:
            raise ValueError("hook request too large")
    request = orjson.loads(b"".join(chunks))
    if not isinstance(request, dict) or not isinstance(request.get("event"), dict):
        raise ValueError("a hook request is {host, event, env}")
    return request


def serve(db: Path, socket_path: Path, open_archive: Callable[[], Any], idle_seconds: float = IDLE_SECONDS) -> int:
    lock = open(socket_path.with_suffix(".lock"), "w")  # noqa: SIM115 (held for the server's life)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another server of this archive is starting or running
    socket_path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(socket_path))
    os.chmod(socket_path, 0o600)
    listener.listen(16)
    listener.settimeout(1.0)
    archive = _Archive(db, open_archive)
    last = time.monotonic()
    try:
        while time.monotonic() - last < idle_seconds:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(None)
                _answer(conn, db, archive)
            last = time.monotonic()
    finally:
        archive.close()
        with contextlib.suppress(OSError):
            socket_path.unlink()
        listener.close()
        lock.close()
    return 0


def _answer(conn: socket.socket, db: Path, archive: _Archive) -> None:
    try:
        request = _read_request(conn)
    except (OSError, ValueError) as exc:
        hooks.log_failure(db, "?", None, exc)
        return
    host, event = str(request.get("host")), request["event"]
    given = request.get("env") if isinstance(request.get("env"), dict) else {}
    env = {**os.environ, **{k: str(v) for k, v in given.items() if k in FORWARDED}}
    answer = hooks.answer_safely(archive, db, host, event, env)
    with contextlib.suppress(OSError):  # the client gave up waiting: nothing to tell it
        conn.sendall(orjson.dumps({"answer": answer}) + b"\n")
