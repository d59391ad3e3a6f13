"""Standard output kept for a protocol: serve's JSON lines, the MCP server's messages, `cwa
call`'s answer, a bulk index's helper answering its parent.

While such a process serves, it writes its protocol to a duplicate of descriptor 1 and points
descriptor 1 itself where stderr goes. Anything else that writes to stdout meanwhile (a `print` in
a library, C code writing to descriptor 1, a tool attached to the process) lands in stderr, not
in the middle of a message, where the reader would take it for part of one: a client's parse
error, or a helper's answers misread (a sampling profiler attached to the helper did this) and its
work done again by its parent.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from cwa.errors import InvalidRequest


@contextmanager
def claimed_stdout() -> Iterator[BinaryIO]:
    """The stream the protocol writes to (buffered: flush each message); descriptor 1 is given
    back at the end. Where stdout is no file descriptor (a test runner's capture), `sys.stdout`'s
    own buffer. InvalidRequest when the process was started with stdout closed: it could answer
    nothing."""
    if sys.stdout is None:
        raise InvalidRequest("stdout is closed: there is nowhere to answer", field="stdout", reason="closed")
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        yield sys.stdout.buffer
        return
    sys.stdout.flush()
    stream = os.fdopen(os.dup(descriptor), "wb")
    _point_at_stderr(descriptor)
    try:
        yield stream
    finally:
        sys.stdout.flush()
        try:
            stream.flush()
        except OSError:  # the reader is gone
            pass
        os.dup2(stream.fileno(), descriptor)
        try:
            stream.close()
        except OSError:
            pass


def _point_at_stderr(descriptor: int) -> None:
    """Descriptor 1 to where stderr goes, or to the null device when stderr is closed."""
    try:
        os.dup2(sys.stderr.fileno(), descriptor)
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, descriptor)
        os.close(null)
