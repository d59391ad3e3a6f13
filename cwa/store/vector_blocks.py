"""A project's sign bits packed in blocks, for the semantic shortlist (migration 0019).

A search's shortlist is the project's vectors nearest the query by the Hamming distance of their
sign bits (cwa/index/semantic.py). Read row by row from `window_vector_bits`, a million vectors
cost one B-tree row and two SQL function calls each. Once a project holds BLOCK_VECTORS sign bits
not packed yet, `pack` copies them, in id order, into one `window_vector_blocks` row (their ids,
then their bits) and marks them packed, their bits moved out of the row (kept once; the row
written again, not shrunk in place, so its pages stay full);
`shortlist` scores a whole block at once with numpy and the unpacked rest in SQL, for one project
or (`scope: all`) every one.

`window_vector_bits` stays the record of what a project holds: a block may name a vector removed
from the project since, so the caller keeps only the ids it still holds (sql/semantic.sql
`nearest`). Packing runs in short transactions, in `cwa serve`'s embedding worker, in each
maintenance pass and after `cwa index embed`; a killed process loses at most the block in progress.
"""

from __future__ import annotations

import sys
import time
from array import array
from collections.abc import Callable

import apsw
import orjson

from cwa.models import DIMENSIONS
from cwa.store.connection import BATCH_GAP_SECONDS as YIELD_SECONDS
from cwa.store.connection import write_transaction
from cwa.store.sqlfiles import queries

BLOCK_VECTORS = 4096  # sign bits per block: 196 KB of bits, 32 KB of ids
BITS_WIDTH = DIMENSIONS // 8  # bytes of sign bits a vector
WORDS = BITS_WIDTH // 8  # 64-bit words a vector's bits span
PACK_PER_STEP = 16 * BLOCK_VECTORS  # sign bits packed per background step or maintenance pass


def pack(conn: apsw.Connection, budget: int = PACK_PER_STEP, stopped: Callable[[], bool] = lambda: False) -> int:
    """Pack whole blocks of unpacked sign bits, one block per transaction, until `budget` sign bits
    are packed or no project has a whole block left; return how many were packed."""
    sql = queries("semantic")
    done = 0
    for project, unpacked in conn.execute(sql["packable_projects"], {"block": BLOCK_VECTORS}).fetchall():
        for _ in range(unpacked // BLOCK_VECTORS):
            if done >= budget or stopped():
                return done
            with write_transaction(conn):
                rows = conn.execute(
                    sql["unpacked_first"], {"project": project, "block": BLOCK_VECTORS, "width": BITS_WIDTH}
                ).fetchall()
                if len(rows) < BLOCK_VECTORS:  # another process packed them first (or malformed bits)
                    break
                ids = array("q", (row[0] for row in rows))
                if sys.byteorder == "big":
                    ids.byteswap()
                conn.execute(
                    sql["insert_block"],
                    {"project": project, "ids": ids.tobytes(), "bits": b"".join(row[1] for row in rows)},
                )
                packed = {"project": project, "ids": orjson.dumps([r[0] for r in rows]).decode()}
                conn.execute(sql["mark_packed"], packed).fetchall()  # two statements: run both
            done += len(rows)
            time.sleep(YIELD_SECONDS)  # a gap for other writers polling SQLite's lock
    return done


def shortlist(conn: apsw.Connection, project_row: int | None, vector_bytes: bytes, size: int) -> list[int] | None:
    """The ids of the `size` sign bits of the project (of every project when None) nearest the
    query's (float32 `vector_bytes`), nearest first, ties by id, each id once; None when there is
    no block to read: every sign bit is then in a row, and the row scan is as fast."""
    import numpy as np  # a semantic search has loaded it with the model already

    sql = queries("semantic")
    bits = conn.execute(sql["query_bits"], {"vector": vector_bytes}).fetchone()[0]
    query = np.frombuffer(bits, dtype="<u8")
    ids, distances = [], []
    held, bound = 0, None  # bound: the `size`-th smallest distance seen so far, once known
    everywhere = project_row is None
    scope = {"project": project_row}
    for block_ids, block_bits in conn.execute(sql["every_block" if everywhere else "project_blocks"], scope):
        counts = np.bitwise_count(np.frombuffer(block_bits, dtype="<u8").reshape(-1, WORDS) ^ query)
        distance = counts[:, 0].astype(np.int32)  # one block's bits in memory at a time
        for word in range(1, WORDS):  # column by column: twice as fast as sum(axis=1)
            distance += counts[:, word]
        block = np.frombuffer(block_ids, dtype="<i8")
        if bound is not None:  # `size` vectors already seen are at least as near as the rest
            kept = distance <= bound
            block, distance = block[kept], distance[kept]
        ids.append(block)
        distances.append(distance)
        held += len(distance)
        if held > 4 * size:  # keep what can still be among the nearest: memory stays a few blocks'
            every_id, every_distance = _nearest_distinct(np.concatenate(ids), np.concatenate(distances), size)
            ids, distances = [every_id], [every_distance]
            held, bound = len(every_id), int(every_distance.max())
    if not ids:
        return None
    unpacked = sql["every_unpacked_distance" if everywhere else "unpacked_distances"]
    rest = conn.execute(unpacked, {**scope, "bits": bits}).fetchall()
    if rest:
        ids.append(np.array([row[0] for row in rest], dtype=np.int64))
        distances.append(np.array([row[1] for row in rest], dtype=np.int32))
    every_id, every_distance = _nearest_distinct(np.concatenate(ids), np.concatenate(distances), size)
    order = np.lexsort((every_id, every_distance))
    return every_id[order].tolist()[:size]


def _nearest_distinct(ids, distance, size: int):
    """The `size` nearest ids, each once, with every one tied at the largest of their distances.
    A content several projects hold, or one removed then scoped again, has one id in several
    places (always at the same distance): it counts once, so it never takes a place another
    content needs."""
    import numpy as np

    if len(ids) > size:
        kept = _nearest(distance, size)
        near = ids[kept]
        if len(np.unique(near)) == len(near):
            return near, distance[kept]
    _, first = np.unique(ids, return_index=True)  # some id repeats among the nearest: drop its copies
    ids, distance = ids[first], distance[first]
    if len(ids) > size:
        kept = _nearest(distance, size)
        ids, distance = ids[kept], distance[kept]
    return ids, distance


def _nearest(distance, size: int):
    """A mask of the `size` smallest distances, with every one tied at the largest of them. A
    vector farther than that largest one, among some of the vectors, is farther than `size` of
    them: never among the nearest of all, so the scan drops it as it goes."""
    import numpy as np

    return distance <= np.partition(distance, size - 1)[size - 1]
