"""The anchor dictionary's lookup key: three bytes of a text's blake3, stored beside the text.

`anchor_texts` is found by text (admission looks up each anchor a document holds; exact search
each anchor a query names). A UNIQUE index of the texts held every text a second time; an index of
this key holds three bytes and the row id instead (migration 0041). Three bytes keep the key one
SQLite integer of three bytes, and a lookup still compares the text itself: among 5.6 million
texts (the 10K coding archive's 5.6 a document, at a million documents) a text shares its key
with a third of another on average.
"""

from __future__ import annotations

import apsw
from blake3 import blake3

SQL_FUNCTION = "cwa_anchor_key"  # migration 0041 fills the key of an archive's texts with it


def key(text: str) -> int:
    """The first three bytes of blake3(text as UTF-8), a little-endian signed integer."""
    return int.from_bytes(blake3(text.encode("utf-8")).digest(length=3), "little", signed=True)


def register(conn: apsw.Connection) -> None:
    """Make `cwa_anchor_key(text)` available on `conn` (migrations.apply_pending does, for the
    migration that adds the key)."""
    conn.create_scalar_function(SQL_FUNCTION, key, 1, deterministic=True)
