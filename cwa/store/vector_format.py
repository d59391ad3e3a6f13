"""How the archive stores a vector, and the conversion of the vectors stored before that.

Since migration 0018 `window_vectors.embedding` is int8[384]: the model's unit vector scaled so its
largest component is ±127, rounded (cosine distance ignores the scale). An archive embedded before
keeps its float32 vectors in `window_vectors_float32`, which search reads beside `window_vectors`
(sql/semantic.sql) until the conversion has moved each into `window_vectors` as int8. It runs in
short transactions of CONVERT_BATCH vectors, in id order, from `cwa serve`'s embedding worker and
from each maintenance pass; a converted vector leaves the float32 table in the same transaction,
so a killed process loses at most the batch in progress and the next one resumes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import apsw

from cwa.models import DIMENSIONS
from cwa.store.connection import in_short_transactions
from cwa.store.sqlfiles import queries

if TYPE_CHECKING:
    import numpy as np

INT8_BYTES = DIMENSIONS  # a vector as stored since migration 0018 (float32 ones took four times that)
CONVERT_BATCH = 1000  # vectors moved per transaction (about 0.1 s)


def quantized(vector: np.ndarray) -> bytes:
    """A vector as the archive stores it: new ones (cwa/index/semantic.py) and converted ones."""
    largest = max(float(abs(vector).max()), 1e-30)  # ndarray methods: numpy stays unimported here
    return (vector * (127.0 / largest)).round().astype("i1").tobytes()


def vectors_to_convert(conn: apsw.Connection) -> int:
    """At most how many float32 vectors wait for the conversion (0 when none)."""
    return conn.execute(queries("semantic")["vectors_to_convert"]).fetchone()[0]


def convert_batch(conn: apsw.Connection, limit: int = CONVERT_BATCH) -> int:
    """Move the next `limit` float32 vectors into `window_vectors` as int8 (`quantized`, the one
    quantization there is), inside the caller's transaction; return how many (0: none was left)."""
    import numpy  # only an archive embedded before migration 0018 gets here

    sql = queries("semantic")
    found = conn.execute(sql["next_float32_vectors"], {"limit": limit}).fetchall()
    if not found:
        return 0
    conn.executemany(
        sql["insert_vector"],
        [{"id": row, "quantized": quantized(numpy.frombuffer(blob, dtype="<f4"))} for row, blob in found],
    )
    conn.execute(sql["drop_converted"], {"first": found[0][0], "last": found[-1][0]})
    return len(found)


def convert(conn: apsw.Connection, budget: int, stopped: Callable[[], bool] = lambda: False) -> int:
    """Convert up to `budget` vectors, each batch its own short transaction; return how many.
    With nothing to convert (every archive since migration 0018, once converted) it only reads."""
    return in_short_transactions(conn, budget, CONVERT_BATCH, convert_batch, vectors_to_convert, stopped)
