"""The purge: bytes and derived rows of documents already out of every mode (expired, redacted).

Run by maintenance in bounded batches. Per document: its derived rows (windows and their BM25F
rows, anchors, structural cues, index outcomes), recall feedback and hint exposures; its chunk ranges, then every chunk no other
document shares; embeddings whose window content no longer exists anywhere. The `documents` row
and its message coordinates stay (no text): enough to answer recall with `expired` (or `missing`
for a redacted one), and to keep ids stable. A redacted document also loses its metadata.

The next document of its session may hold some of its terms as lexical context
(cwa/index/lexical.py): given the index `handlers`, that document is indexed again, so no term of
the gone document stays findable through it.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from cwa.store import term_counts
from cwa.store.derived import Generation, IndexHandler, drop_derived, load_target, run_handlers
from cwa.store.sqlfiles import queries


def purge(conn: apsw.Connection, limit: int, handlers: Sequence[IndexHandler] = (), now: str = "") -> int:
    """Purge at most `limit` queued documents (inside the caller's transaction)."""
    sql = queries("lifecycle")
    queued = conn.execute(sql["next_purges"], {"limit": limit}).fetchall()
    successors: set[int] = set()
    for row, reason in queued:
        successors.update(r for (r,) in conn.execute(sql["indexed_successor"], (row,)))
        for content_hash in drop_derived(conn, row):
            _forget_embedding(conn, content_hash, row)
        conn.execute(sql["delete_feedback_of"], (row,))
        conn.execute(sql["delete_exposures_of"], (row,))
        chunks = [r[0] for r in conn.execute(sql["chunks_of"], (row,))]
        conn.execute(sql["keep_text_digest"], (row,))
        conn.execute(sql["delete_document_chunks_of"], (row,))
        for chunk in chunks:
            conn.execute(sql["delete_chunk_if_unreferenced"], (chunk, chunk))
        if reason == "redacted":
            conn.execute(sql["forget_metadata"], (row,))
        conn.execute(sql["done_purge"], (row,))
    if queued:
        term_counts.forget(conn)
    if handlers and successors:
        _reindex(conn, handlers, now, sorted(successors))
    return len(queued)


def _reindex(conn: apsw.Connection, handlers: Sequence[IndexHandler], now: str, rows: list[int]) -> None:
    """Index again the documents whose lexical context came from a purged one."""
    indexable = queries("index")["indexable_document"]
    generation = Generation(conn, now, "rebuild")
    for row in rows:
        found = conn.execute(indexable, (row,)).fetchone()
        if found is None:  # gone too (a session purged together)
            continue
        drop_derived(conn, row)
        run_handlers(conn, handlers, generation.id(), load_target(conn, row, found[0], found[1]))
        generation.mark(row)
    generation.finish()


def _forget_embedding(conn: apsw.Connection, content_hash: str, row: int) -> None:
    """A window content the purged document `row` held: its project's sign bits go when the
    project holds it no more, its vector (and all its bits) when no window does."""
    sql = queries("lifecycle")
    conn.execute(sql["dequeue_content_if_unreferenced"], {"hash": content_hash})
    conn.execute(sql["unscope_content"], {"row": row, "hash": content_hash})
    unreferenced = conn.execute(sql["embedding_if_unreferenced"], {"hash": content_hash}).fetchall()
    for (embedding_id,) in unreferenced:  # a piece each
        conn.execute(sql["delete_vector_bits"], (embedding_id,))
        conn.execute(sql["delete_vector"], (embedding_id,))
        conn.execute(sql["delete_float32_vector"], (embedding_id,))  # one not converted to int8 yet
        conn.execute(sql["delete_embedding"], (embedding_id,))


def pending(conn: apsw.Connection) -> int:
    return conn.execute(queries("lifecycle")["purge_count"]).fetchone()[0]
