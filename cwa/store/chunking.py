"""Splitting document bytes into content-addressed chunks.

A chunk holds at most MAX_CHUNK_BYTES and never ends inside a UTF-8 sequence. Once a chunk holds
CHUNK_NEWLINE_AFTER bytes it ends at the next newline, so boundaries follow the text's own lines:
the same lines shared by two documents tend to land in identical chunks, stored once.
"""

from __future__ import annotations

from cwa.limits import CHUNK_NEWLINE_AFTER, MAX_CHUNK_BYTES


def _utf8_boundary(data: bytes, position: int, floor: int) -> int:
    """The largest position <= `position` (and > `floor`) that does not split a UTF-8 sequence."""
    while position > floor + 1 and (data[position] & 0xC0) == 0x80:
        position -= 1
    return position


def chunk_spans(
    data: bytes,
    max_bytes: int = MAX_CHUNK_BYTES,
    newline_after: int = CHUNK_NEWLINE_AFTER,
) -> list[tuple[int, int]]:
    """Half-open byte spans covering `data` in order; empty data has no chunks."""
    spans = []
    start, size = 0, len(data)
    while start < size:
        limit = start + max_bytes
        if limit >= size:
            spans.append((start, size))
            break
        newline = data.find(b"\n", start + newline_after - 1, limit)
        end = newline + 1 if newline != -1 else _utf8_boundary(data, limit, start)
        spans.append((start, end))
        start = end
    return spans
