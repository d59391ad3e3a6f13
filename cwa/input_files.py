"""Reading a file or a stream the user names, never more than a limit.

`/dev/zero`, a named pipe or a multi-gigabyte log must not fill memory before the size check:
input is read in blocks and refused with `limit-exceeded` as soon as it passes the limit.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from cwa.errors import InvalidRequest, LimitExceeded

BLOCK = 1 << 20


def read_stream(stream: BinaryIO, limit: int, what: str) -> bytes:
    """All of `stream`, or `limit-exceeded` once it is over `limit` bytes (at most limit + 1 read)."""
    blocks, size = [], 0
    while True:
        block = stream.read(min(BLOCK, limit + 1 - size))
        if not block:
            return b"".join(blocks)
        blocks.append(block)
        size += len(block)
        if size > limit:
            raise LimitExceeded(f"{what} is larger than {limit:,} bytes", reason="too-large", limit=limit)


def read_file(path: Path, limit: int) -> bytes:
    """A named file's bytes within `limit`; a regular file's size is checked before reading."""
    try:
        if path.is_file() and path.stat().st_size > limit:
            raise LimitExceeded(
                f"{path} is {path.stat().st_size:,} bytes; the limit is {limit:,}",
                field="file",
                reason="too-large",
                limit=limit,
                size=path.stat().st_size,
            )
        with path.open("rb") as stream:
            return read_stream(stream, limit, str(path))
    except OSError as exc:
        raise InvalidRequest(f"cannot read {path}: {exc.strerror or exc}", field="file", reason="unreadable") from exc
