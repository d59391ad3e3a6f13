"""A document's anchors as one packed list (cwa/store/anchor_lists.py): what admission writes,
exact search and a purge read back, exactly."""

import random

import apsw
import pytest

from cwa.errors import ArchiveCorrupt
from cwa.store import anchor_lists


def entries(seed: int, count: int) -> list[tuple[int, int, int, int, int]]:
    rng = random.Random(seed)
    ids = rng.sample(range(1, 2**40), count)  # ids past every varint width the list uses
    listed = []
    for text_id in ids:
        start = rng.choice([0, 127, 128, 16_383, 16_384, rng.randrange(2**32)])
        listed.append((text_id, rng.randrange(1, 256), start, start + rng.randrange(1, 5000), rng.randrange(1, 300)))
    return listed


@pytest.mark.parametrize("seed", range(5))
def test_a_list_gives_back_each_entry_in_text_id_order(seed):
    listed = entries(seed, 40)
    packed = anchor_lists.pack(listed)
    assert anchor_lists.unpack(packed) == sorted(listed)
    assert anchor_lists.text_ids(packed) == sorted(text_id for text_id, *_ in listed)
    for text_id, _, start, end, _ in listed:
        assert anchor_lists.span(packed, text_id) == (start, end)
    held = {text_id for text_id, *_ in listed}
    absent = [t for t in (1, max(held) + 1, *(t + 1 for t in held)) if t not in held]
    assert absent and all(anchor_lists.span(packed, t) is None for t in absent)


def test_a_list_is_a_few_bytes_an_anchor():
    # a coding document's anchors: nearby ids, short ranges, counted once
    listed = [(1_000_000 + 40_000 * i, 64, 120 * i, 120 * i + 12, 1) for i in range(13)]
    assert len(anchor_lists.pack(listed)) <= 13 * 9


def test_a_text_listed_twice_or_a_negative_number_is_refused():
    with pytest.raises(ValueError):
        anchor_lists.pack([(5, 1, 0, 3, 1), (5, 2, 4, 9, 1)])
    with pytest.raises(ValueError):
        anchor_lists.pack([(5, 1, 10, 3, 1)])  # ends before it starts


def test_a_list_cut_short_is_reported_corrupt():
    packed = anchor_lists.pack(entries(7, 3))
    with pytest.raises(ArchiveCorrupt):
        anchor_lists.unpack(packed[:-1] + bytes([0x80]))
    with pytest.raises(ArchiveCorrupt):
        anchor_lists.unpack(packed + bytes([1]))  # an entry begun and not finished
    cut = anchor_lists.pack([(9, 1, 300, 310, 1)])[:3]  # inside the start's two bytes
    with pytest.raises(ArchiveCorrupt):
        anchor_lists.span(cut, 9)


def test_sql_packs_rows_by_document_and_reads_a_start(tmp_path):
    conn = apsw.Connection(str(tmp_path / "a.db"))
    anchor_lists.register(conn)
    listed = {1: entries(1, 5), 2: entries(2, 1)}
    conn.execute("CREATE TABLE rows (document_row, text_id, types, start_byte, end_byte, occurrences)")
    conn.executemany(
        "INSERT INTO rows VALUES (?, ?, ?, ?, ?, ?)", [(d, *e) for d, found in listed.items() for e in found]
    )
    packed = dict(
        conn.execute(
            "SELECT document_row, cwa_pack_anchors(text_id, types, start_byte, end_byte, occurrences) "
            "FROM rows GROUP BY document_row"
        )
    )
    assert {d: anchor_lists.unpack(p) for d, p in packed.items()} == {d: sorted(e) for d, e in listed.items()}
    text_id, _, start, _, _ = listed[1][3]
    read = "SELECT cwa_anchor_start(?, ?)"
    assert conn.execute(read, (packed[1], text_id)).fetchone() == (start,)
    assert conn.execute(read, (packed[2], text_id)).fetchone() == (None,)
    assert conn.execute(read, (None, text_id)).fetchone() == (None,)
