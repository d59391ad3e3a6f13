"""Chunk spans cover the bytes exactly, stay within the size limit, never split a character,
and prefer to end on a newline once 16 KiB are in the chunk."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cwa.store.chunking import chunk_spans


def _check(data: bytes, max_bytes: int, newline_after: int) -> None:
    spans = chunk_spans(data, max_bytes, newline_after)
    assert b"".join(data[s:e] for s, e in spans) == data
    position = 0
    for start, end in spans:
        assert start == position and end > start
        assert end - start <= max_bytes
        data[start:end].decode("utf-8")
        position = end
        if end != len(data):
            piece = data[start:end]
            newline = data.find(b"\n", start + newline_after - 1, start + max_bytes)
            if newline != -1:
                assert end == newline + 1
            else:
                assert b"\n" not in piece[newline_after - 1 :]
    assert position == len(data)


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("ab\n é漢🚀")), max_size=600),
    max_bytes=st.integers(4, 64),
    fraction=st.floats(0.1, 1.0),
)
def test_chunk_spans_properties_on_small_limits(text, max_bytes, fraction):
    _check(text.encode("utf-8"), max_bytes, max(1, int(max_bytes * fraction)))


def test_real_limits_on_a_large_text():
    data = ("漢字🚀 line of text\n" * 20_000 + "x" * 200_000).encode("utf-8")
    _check(data, 64 * 1024, 16 * 1024)
    spans = chunk_spans(data)
    assert all(data[s:e].endswith(b"\n") for s, e in spans[:-5] if e - s < 64 * 1024)


def test_empty_text_has_no_chunks():
    assert chunk_spans(b"") == []
