"""`cwa index rebuild`: recompute every derived row from the canonical rows.

The rebuild runs in one write transaction, so readers see either the old indexes or the new ones,
never half of each; handlers are deterministic, so the same canonical rows give the same search
results.
"""

from __future__ import annotations

from typing import Callable, Sequence

import apsw

from cwa.store.derived import IndexHandler, IndexTarget, run_handlers
from cwa.store.connection import write_transaction
from cwa.store.reads import read_bytes
from cwa.store.serialization import SerializedDocument, SerializedMessage
from cwa.store.sqlfiles import queries


def load_target(conn: apsw.Connection, document_row: int, kind: str, byte_length: int) -> IndexTarget:
    """Rebuild a handler's input from canonical rows."""
    text, _ = read_bytes(conn, document_row, 0, byte_length)
    messages = tuple(
        SerializedMessage(key, role, tool_name, tool_call_id, timestamp, start, text_start, end)
        for key, role, tool_name, tool_call_id, timestamp, start, text_start, end in conn.execute(
            queries("index")["document_messages"], (document_row,)
        )
    )
    return IndexTarget(document_row, kind, SerializedDocument(text, messages))


def rebuild_indexes(
    conn: apsw.Connection,
    handlers: Sequence[IndexHandler],
    now: str,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    sql = queries("index")
    admission = queries("admission")
    outcomes: dict[str, dict[str, int]] = {}
    with write_transaction(conn):
        for name in ("delete_window_fts", "delete_windows", "reset_window_count", "delete_anchors",
                     "delete_cues", "delete_outcomes"):
            conn.execute(sql[name])
        conn.execute(admission["insert_generation"], ("rebuild", now))
        generation = conn.last_insert_rowid()
        documents = conn.execute(sql["all_documents"]).fetchall()
        for done, (row, kind, byte_length) in enumerate(documents, 1):
            target = load_target(conn, row, kind, byte_length)
            for handler, outcome in run_handlers(conn, handlers, generation, target).items():
                counts = outcomes.setdefault(handler, {})
                counts[outcome] = counts.get(outcome, 0) + 1
            conn.execute(sql["set_generation"], (generation, row))
            if progress:
                progress(done, len(documents))
        conn.execute(admission["finish_generation"], (now, generation))
    return {"generation": generation, "documents": len(documents), "outcomes": outcomes}


def backfill_if_needed(
    conn: apsw.Connection, handlers: Sequence[IndexHandler], clock: Callable[[], str]
) -> dict | None:
    """After an upgrade from schema 1 (migration 0007's marker), rebuild the derived indexes once
    so the documents written before they existed can be found; None when there is nothing to do.
    Two processes opening the archive at once may both rebuild: the result is the same."""
    sql = queries("index")
    if not conn.execute(sql["backfill_needed"]).fetchone()[0]:
        return None
    result = rebuild_indexes(conn, handlers, clock())
    with write_transaction(conn):
        conn.execute(sql["backfill_done"])
    return result
