"""Common terms' window counts kept in the archive (`term_counts`, migration 0025).

Counting a term's windows reads its whole posting list (10–20 ms for a term in most of a million
windows), so a search keeps the count of a term in more than COMMON_TERM_WINDOWS windows and reuses
it until the archive's window count has moved by more than COMMON_TERM_DRIFT
(cwa/retrieve/context.py). A search keeps only the terms it met; a new process (a hook, `cwa
call`, a restarted serve) still counted each other common term once, in the middle of a user's
turn. `refresh` keeps every common term at once, from one read of the vocabulary without the
write lock (most of a 4 s `cwa maintain` at a million windows), when the kept set is missing or
has drifted: each maintenance pass calls it, and `cwa serve`'s maintenance thread as it starts.

A purge or an index rebuild forgets every kept count (`forget`): no term a forgotten document held
may outlive it here. A refresh that read the vocabulary before such a forget writes nothing.
"""

from __future__ import annotations

import apsw
import orjson

from cwa.store.connection import write_transaction
from cwa.store.sqlfiles import queries

COMMON_TERM_WINDOWS = 5_000
COMMON_TERM_DRIFT = 0.1
STATE_KEY = "term_counts_kept"  # meta: [forgets so far, window count when every common term was kept, or null]


def forget(conn: apsw.Connection) -> None:
    """Drop every kept count and count one more forget, inside the caller's transaction: the kept
    set is incomplete, and a refresh that read the vocabulary before this writes nothing."""
    conn.execute(queries("lifecycle")["forget_term_counts"])
    _set_state(conn, _state(conn)[0] + 1, None)


def refresh(conn: apsw.Connection) -> int:
    """Keep the count of every common term when the kept set is missing or has drifted; how many."""
    found = read_common(conn)
    return keep(conn, found) if found is not None else 0


def read_common(conn: apsw.Connection) -> tuple[int, int, list[tuple[str, int, int]]] | None:
    """When the kept set is missing or has drifted: the forgets so far, the window count and every
    common term with its count, read without the write lock; else None."""
    forgets, complete_at = _state(conn)
    windows = conn.execute(queries("search")["window_count"]).fetchone()[0]
    if windows <= COMMON_TERM_WINDOWS:
        return None  # no term can be that common yet
    if complete_at is not None and abs(windows - complete_at) <= COMMON_TERM_DRIFT * complete_at:
        return None
    found = conn.execute(queries("lifecycle")["common_terms"], (COMMON_TERM_WINDOWS,))
    return forgets, windows, [(term, count, windows) for term, count in found]


def keep(conn: apsw.Connection, found: tuple[int, int, list[tuple[str, int, int]]]) -> int:
    """Write what `read_common` found, unless a purge or a rebuild forgot the counts since."""
    forgets, windows, counted = found
    with write_transaction(conn):
        if _state(conn)[0] != forgets:
            return 0
        conn.execute(queries("search")["keep_term_counts"], (orjson.dumps(counted).decode(),))
        _set_state(conn, forgets, windows)
    return len(counted)


def _state(conn: apsw.Connection) -> tuple[int, int | None]:
    found = conn.execute(queries("lifecycle")["meta_get"], (STATE_KEY,)).fetchone()
    if found is None:
        return 0, None
    forgets, complete_at = orjson.loads(found[0])
    return forgets, complete_at


def _set_state(conn: apsw.Connection, forgets: int, complete_at: int | None) -> None:
    conn.execute(queries("lifecycle")["meta_set"], (STATE_KEY, orjson.dumps([forgets, complete_at]).decode()))
