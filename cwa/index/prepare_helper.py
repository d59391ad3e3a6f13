"""The helper process of a bulk index (the end of `cwa import`, `cwa index rebuild`): it reads the
documents through a read-only connection and does their pure work (`prepare_queued`: loading,
tokenizing, anchors, deflating) while the parent writes (cwa/index/queue_worker.py
`prepared_documents`).

It is started as a module of this cwa (cwa/child_process.py), never through multiprocessing's
`spawn`, which would run the parent's `__main__` again in the child (a user's unguarded script).
Exchanges are frames on the child's stdin and stdout, a 4-byte big-endian length then a pickle:
the parent sends `(chunk, deflate)`, the child answers each in order with `("ok", prepared)` or
`("error", message)`. The child writes its answers from a thread of its own, so it keeps reading
while the parent is still sending: neither waits on a full pipe the other does not empty.
"""

from __future__ import annotations

import pickle
import queue
import select
import struct
import subprocess
import sys
import threading
from typing import IO

from cwa.child_process import python_module
from cwa.index.handlers import default_handlers
from cwa.protocol_output import claimed_stdout
from cwa.store.connection import open_read_only
from cwa.store.index_queue import Prepared, Queued, prepare_queued

FRAME = struct.Struct(">I")
CLOSE_SECONDS = 5.0  # how long a closed helper may take to finish the exchange in hand


class HelperFailed(Exception):
    """The helper answered with an error, or ended."""


class Helper:
    """The parent's handle on one helper process for the archive at `path`."""

    def __init__(self, path: str) -> None:
        command, env = python_module("cwa.index.prepare_helper", path)
        self.child = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        # Answers are read unbuffered, so `ready` sees in the pipe all there is to read.
        self.answers = self.child.stdout.raw

    def send(self, chunk: list[Queued], deflate: bool) -> None:
        """Ask for `chunk`'s documents prepared (`prepare_queued`, `deflate` as there)."""
        _write_frame(self.child.stdin, pickle.dumps((chunk, deflate), protocol=pickle.HIGHEST_PROTOCOL))

    def ready(self) -> bool:
        """Whether an answer (or the helper's end) waits to be received."""
        return bool(select.select([self.answers], [], [], 0)[0])

    def receive(self) -> list[Prepared]:
        """The answer to the oldest exchange not yet received (HelperFailed if it failed)."""
        status, value = pickle.loads(_read_frame(self.answers))
        if status != "ok":
            raise HelperFailed(value)
        return value

    def close(self) -> None:
        for stream in (self.child.stdin, self.child.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.child.wait(CLOSE_SECONDS)
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait()


def _write_frame(stream: IO[bytes], data: bytes) -> None:
    stream.write(FRAME.pack(len(data)) + data)
    stream.flush()


def _read_frame(stream: IO[bytes]) -> bytes:
    head = _read_exactly(stream, FRAME.size)
    if len(head) < FRAME.size:
        raise HelperFailed("the helper ended")
    (size,) = FRAME.unpack(head)
    data = _read_exactly(stream, size)
    if len(data) < size:
        raise HelperFailed("the helper ended mid-answer")
    return data


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    """`size` bytes, or fewer where the stream ends (an unbuffered one may return less a read)."""
    parts, left = [], size
    while left:
        part = stream.read(left)
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def main(path: str) -> None:
    """The child: answer each exchange until the parent closes its end."""
    with claimed_stdout() as frames:  # what else writes to stdout goes where stderr goes, not into an answer
        _answer(path, frames)


def _answer(path: str, frames: IO[bytes]) -> None:
    conn = open_read_only(path)
    handlers = default_handlers()
    answers: queue.Queue[bytes | None] = queue.Queue()

    def write() -> None:
        while (data := answers.get()) is not None:
            try:
                _write_frame(frames, data)
            except OSError:  # the parent stopped reading (it stopped early): nothing to answer
                return

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        while True:
            try:
                chunk, deflate = pickle.loads(_read_frame(sys.stdin.buffer))
            except HelperFailed:
                break  # the parent closed its end
            try:
                prepared = [prepare_queued(conn, handlers, queued, deflate) for queued in chunk]
                answer = pickle.dumps(("ok", prepared), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # the parent prepares this chunk itself, where a real fault shows again
                answer = pickle.dumps(("error", f"{type(exc).__name__}: {exc}"))
            answers.put(answer)
    finally:
        answers.put(None)
        writer.join()
        conn.close()


if __name__ == "__main__":
    main(sys.argv[1])
