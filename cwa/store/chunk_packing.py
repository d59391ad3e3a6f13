"""The conversion of the chunks stored before migration 0038, whose payloads are their bytes as
they are, into payloads deflated where that is shorter (cwa/store/payloads.py).

Migration 0038 marks the span of chunk ids it found (`pack_chunks_from`, `pack_chunks_below` in
`meta`); chunks stored since are deflated as they are written (or, a queued document's, as the
index queue indexes it). The conversion walks that span in
id order, PACK_BATCH chunks a transaction, from each maintenance pass and from `cwa serve`'s
index worker in serve's pauses; the mark moves with each batch's commit, so a killed process
loses at most its batch and the next one resumes. Every chunk reads the same before, during and
after (a payload of its bytes' length is the bytes), so nothing waits for the conversion. The
pages it frees inside the table go back to the file system with `cwa maintain --vacuum`.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from cwa.store.connection import in_short_transactions
from cwa.store.payloads import deflated_rows
from cwa.store.sqlfiles import queries

PACK_BATCH = 500  # chunks looked at per transaction


def chunks_to_pack(conn: apsw.Connection) -> int:
    """At most how many chunks stored before migration 0038 the conversion has yet to look at."""
    return conn.execute(queries("payloads")["chunks_to_pack"]).fetchone()[0]


def pack_batch(conn: apsw.Connection, limit: int = PACK_BATCH) -> int:
    """Deflate the next `limit` chunks of the span, inside the caller's transaction, and move the
    mark past them (removed once it reaches the span's end); return how many were looked at."""
    sql = queries("payloads")
    found = conn.execute(sql["next_chunks_to_pack"], {"limit": limit}).fetchall()
    whole = [(row, payload) for row, byte_length, payload in found if len(payload) == byte_length]
    conn.executemany(sql["store_deflated"], deflated_rows(whole))
    conn.execute(sql["conversion_past"], {"last": found[-1][0] if found else None})
    conn.execute(sql["conversion_done"])
    return len(found)


def pack_stored(conn: apsw.Connection, budget: int, stopped: Callable[[], bool] = lambda: False) -> int:
    """Look at up to `budget` chunks of the span, each batch its own short transaction; return how
    many. With no span left (every archive created since 0038, and every other once converted) it
    only reads."""
    return in_short_transactions(conn, budget, PACK_BATCH, pack_batch, chunks_to_pack, stopped)
