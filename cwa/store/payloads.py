"""A chunk's payload: its bytes as `chunks.data` stores them, deflated where that is shorter.

Since migration 0038 `chunks.data` follows SQLite's sqlar convention: a payload shorter than the
chunk's `byte_length` is a zlib stream of the bytes; one of that length is the bytes themselves
(what deflating would not shrink; a queued document's until the index queue indexes it,
cwa/store/index_queue.py; and the chunks stored before 0038 until cwa/store/chunk_packing.py
reaches them). `hash` and `byte_length` describe the bytes, never the payload. The sqlite3 shell's
`sqlar_uncompress(data, byte_length)` reads either kind; cwa registers a function of that name and
meaning on its connections (`register`), so the `document_texts` view reads the same everywhere.

Deflating is lossless (reads give back the exact bytes, checked against `hash` by `cwa doctor`).
`cwa eval perf`'s coding corpus takes 57% of its bytes, its chat turns 77% (docs/performance.md).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any

import apsw

from cwa.errors import ArchiveCorrupt

MIN_PACKED = 64  # shorter bytes cannot gain enough to pay for the stream's 6 bytes of framing
# zlib's level 6 (its default) up to this size, level 1 beyond: a large document admitted directly
# (not through the index queue, which deflates off the request) is deflated inside the request
# that stores it, and level 1 is the faster for somewhat more bytes (`python eval/perf/deflate.py`).
FAST_ABOVE = 16 * 1024
SQL_FUNCTION = "sqlar_uncompress"


def packed(data: bytes) -> bytes:
    """The payload that stores `data`: its zlib stream when that is shorter, else `data`."""
    if len(data) < MIN_PACKED:
        return data
    stream = deflated(data, 6 if len(data) <= FAST_ABOVE else 1)
    return stream if len(stream) < len(data) else data


def deflated(data: bytes, level: int) -> bytes:
    """`data`'s zlib stream at `level`, with a window and hash table sized to it: zlib's default
    state (a 32 KiB window, 256 KiB in all) costs more to set up than deflating a short turn does."""
    window = min(15, max(9, (len(data) - 1).bit_length()))
    deflater = zlib.compressobj(level, zlib.DEFLATED, window, max(4, min(8, window - 6)))
    return deflater.compress(data) + deflater.flush()


def unpacked(payload: bytes, byte_length: int, chunk: int | None = None) -> bytes:
    """The bytes a payload stores (sqlar's rule: a payload of the bytes' length is the bytes)."""
    if len(payload) == byte_length:
        return payload
    try:
        data = zlib.decompress(payload)
    except zlib.error as exc:
        data, reason = b"", str(exc)
    else:
        reason = "" if len(data) == byte_length else f"{len(data)} bytes inflated, {byte_length} recorded"
    if reason:
        raise ArchiveCorrupt(
            f"chunk {chunk} of the archive cannot be read ({reason}): run `cwa doctor`",
            reason="chunk-unreadable",
            chunk=chunk,
        )
    return data


def deflated_rows(whole: Iterable[tuple[int, bytes]]) -> list[dict[str, Any]]:
    """Of chunks stored as their bytes (`(id, bytes)` each), those deflating shortens, as rows for
    sql/payloads.sql's `store_deflated`: the index queue's and the conversion's."""
    return [{"id": chunk, "data": stream} for chunk, data in whole if len(stream := packed(data)) < len(data)]


def sql_uncompress(payload: bytes | None, byte_length: int | None) -> bytes | None:
    """`sqlar_uncompress(data, sz)` as the sqlite3 shell defines it: the payload itself when `sz`
    is not positive, else the bytes it stores (`unpacked`)."""
    if payload is None or byte_length is None or byte_length <= 0:
        return payload
    return unpacked(payload, byte_length)


def register(conn: apsw.Connection) -> None:
    """Make `sqlar_uncompress` available on `conn` (the `document_texts` view calls it)."""
    conn.create_scalar_function(SQL_FUNCTION, sql_uncompress, 2, deterministic=True)
