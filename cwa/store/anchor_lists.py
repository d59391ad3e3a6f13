"""A document's exact anchors packed into one row: `anchors.packed` (migration 0042).

A row per (document, text) took 22.7 bytes of pages (its record header, the document's and the
text's ids, the cell's size and pointer, the pages' free space); a list takes 7.3 bytes an anchor,
its row included. At a million coding documents, 13.35 anchors each, 303.0 MB of rows became 97.2
MB of lists: 0.37 × the text's 563 MB saved (`python eval/perf/upgrade.py --archive COPY --pages
anchors`; docs/performance.md, "Anchors packed into one list a document"). A document has one row, its anchors one after another in text id order, each as five
unsigned LEB128 varints:

    text id − the previous entry's text id (the first: the text id itself)
    types          bit 1 << anchor_types.id for each type the text was found as
    start_byte     first occurrence, as its most specific type
    end_byte − start_byte
    occurrences    as that type

Only exact search (the byte range of a text a document holds) and a purge (the texts a document
held) read the list; cwa registers `cwa_anchor_start(packed, text_id)` on its connections for the
filter that needs a range inside SQL, and `cwa_pack_anchors(...)` for the migration. The sqlite3
shell has neither: the list is a derived index (`cwa index rebuild` writes it again), the text ids
a document holds are also its `anchor_postings` tokens.
"""

from __future__ import annotations

from collections.abc import Iterable

import apsw

from cwa.errors import ArchiveCorrupt

FIELDS = 5
START_FUNCTION = "cwa_anchor_start"  # exact search's filter of anchors in messages still in context
PACK_FUNCTION = "cwa_pack_anchors"  # migration 0042 packs the rows of schema 41 with it


def _varint(value: int, out: bytearray) -> None:
    if value < 0:
        raise ValueError(f"an anchor list holds no negative number ({value})")
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def tail(types: int, start: int, end: int, occurrences: int) -> bytes:
    """An entry's numbers after its text id: what the entry holds whatever id the text gets (the
    index queue computes it before the write lock; `pack_tails` adds the ids)."""
    out = bytearray()
    for value in (types, start, end - start, occurrences):
        _varint(value, out)
    return bytes(out)


def pack_tails(entries: Iterable[tuple[int, bytes]]) -> bytes:
    """The list of `entries` ((text_id, its `tail`), one per text), in text id order."""
    out = bytearray()
    previous = 0
    for text_id, rest in sorted(entries):
        if out and text_id == previous:
            raise ValueError(f"text {text_id} is listed twice")
        _varint(text_id - previous, out)
        out += rest
        previous = text_id
    return bytes(out)


def pack(entries: Iterable[tuple[int, int, int, int, int]]) -> bytes:
    """The list of `entries` ((text_id, types, start_byte, end_byte, occurrences), one per text),
    in text id order."""
    return pack_tails((text_id, tail(*rest)) for text_id, *rest in entries)


def _values(packed: bytes) -> Iterable[int]:
    """The list's numbers in order, as stored (ids as differences, ends as lengths)."""
    value = shift = 0
    for byte in packed:
        value |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
            continue
        yield value
        value = shift = 0
    if shift:
        raise ArchiveCorrupt("an anchor list ends inside a number")


def unpack(packed: bytes) -> list[tuple[int, int, int, int, int]]:
    """Every entry of the list: (text_id, types, start_byte, end_byte, occurrences)."""
    entries = []
    fields: list[int] = []
    text_id = 0
    for value in _values(packed):
        fields.append(value)
        if len(fields) == FIELDS:
            text_id += fields[0]
            entries.append((text_id, fields[1], fields[2], fields[2] + fields[3], fields[4]))
            fields = []
    if fields:
        raise ArchiveCorrupt("an anchor list ends inside an entry")
    return entries


def posting_tokens(text_ids: Iterable[int]) -> str:
    """A document's `anchor_postings` column: the token `a<id>` of each of its texts (the SQL
    that searches the postings spells the same token as `'a' || id`)."""
    return " ".join(f"a{text_id}" for text_id in text_ids)


def text_ids(packed: bytes) -> list[int]:
    """The texts the document holds, in id order (a purge checks whether any other holds them)."""
    return [entry[0] for entry in unpack(packed)]


def span(packed: bytes, text_id: int) -> tuple[int, int] | None:
    """The byte range of `text_id` in the document, or None when the list does not hold it. Exact
    search calls it for every document holding a query's anchor (up to 1,000), so it reads no
    further than that entry (ids ascend), skips the other entries' numbers without decoding them,
    and reads its varints inline rather than through `_values`."""
    at, end, current, entry = 0, len(packed), 0, []
    try:
        while at < end:
            byte = packed[at]
            at += 1
            value, shift = byte & 0x7F, 7
            while byte & 0x80:
                byte = packed[at]
                at += 1
                value |= (byte & 0x7F) << shift
                shift += 7
            if entry:  # inside text_id's entry: its types, start and length
                entry.append(value)
                if len(entry) == FIELDS - 1:
                    return entry[2], entry[2] + entry[3]
                continue
            current += value
            if current < text_id:  # skip its types, start, length and occurrences
                skipped = 0
                while skipped < FIELDS - 1:
                    if packed[at] < 0x80:
                        skipped += 1
                    at += 1
                continue
            if current > text_id:
                return None
            entry.append(current)
    except IndexError:
        raise ArchiveCorrupt("an anchor list ends inside an entry") from None
    return None


def start_of(packed: bytes | None, text_id: int) -> int | None:
    """`cwa_anchor_start(packed, text_id)`: where `text_id` starts in the document, else NULL."""
    found = span(packed, text_id) if packed else None
    return found[0] if found else None


class _Packer:
    """`cwa_pack_anchors(text_id, types, start_byte, end_byte, occurrences)`: a document's rows of
    schema 41, grouped by document, as its list."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, int, int, int, int]] = []

    def step(self, *row: int) -> None:
        self.entries.append(row)

    def final(self) -> bytes:
        return pack(self.entries)


def register(conn: apsw.Connection) -> None:
    """Make `cwa_anchor_start` and `cwa_pack_anchors` available on `conn`."""
    conn.create_scalar_function(START_FUNCTION, start_of, 2, deterministic=True)
    conn.create_aggregate_function(PACK_FUNCTION, lambda: (_Packer(), _Packer.step, _Packer.final))
