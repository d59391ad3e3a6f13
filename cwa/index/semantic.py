"""The semantic index: window embeddings, filled off the admission path.

Admission only enqueues (the `semantic` handler: window contents without a vector) and gives the
document's project the sign bits of contents already embedded; `drain`
embeds a bounded batch at a time (`cwa index embed`, and `cwa serve` in the background). Vectors
are keyed by window content hash, so identical windows share one and a rebuild re-embeds nothing.
The archive records the model fingerprint its vectors came from; when the installed model's
fingerprint differs, the old vectors are dropped and every window is queued again, never mixed.
A content longer than the model's 256 tokens has a vector for each piece of 256 (cwa/models.py),
and a window is as near a query as its nearest piece. Vectors of the same graph from before
(each text cut at its first 256 tokens, which is exactly its first piece) are kept when the
archive adopts this fingerprint, and the contents that may hold more wait in `embedding_refresh`
for their other pieces, embedded once the queue is empty.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import apsw
import orjson

from cwa.model_variants import active
from cwa.models import MAX_TOKENS, Embedder, ModelUnavailable, embedder
from cwa.store import vector_blocks
from cwa.store.connection import write_transaction
from cwa.store.derived import HandlerResult, IndexTarget
from cwa.store.reads import window_text
from cwa.store.sqlfiles import queries
from cwa.store.vector_format import convert, quantized, vectors_to_convert
from cwa.store.workers import DaemonWorker

if TYPE_CHECKING:  # numpy loads with the model, not with every admission
    import numpy as np

DRAIN_BATCH = 64  # window contents embedded per transaction


class SemanticQueueHandler:
    """Queues the document's new window contents for embedding (no model is loaded here)."""

    name = "semantic"

    def index(self, conn: apsw.Connection, target: IndexTarget) -> HandlerResult:
        sql = queries("semantic")
        conn.execute(sql["enqueue_document"], {"row": target.document_row})
        queued = conn.changes()
        # A content just queued has no vector yet, so when every window's was, there are no sign
        # bits to give the project: the statement that looks for them (six tables) is skipped.
        if queued < conn.execute(sql["document_window_count"], {"row": target.document_row}).fetchone()[0]:
            conn.execute(sql["scope_document"], {"row": target.document_row})
        return HandlerResult("complete", None)


def sample_texts(conn: apsw.Connection, count: int, min_words: int) -> list[str]:
    """Up to `count` window texts of at least `min_words` words, as embedded (`models optimize`
    measures a model on them)."""
    texts = []
    for row in conn.execute(queries("semantic")["sample_windows"], (count * 2,)):
        text = window_text(conn, *row)
        if len(text.split()) >= min_words:
            texts.append(text)
        if len(texts) == count:
            break
    return texts


def pending(conn: apsw.Connection) -> int:
    return conn.execute(queries("semantic")["pending_count"]).fetchone()[0]


def stored_fingerprint(conn: apsw.Connection) -> str | None:
    row = conn.execute(queries("semantic")["fingerprint"]).fetchone()
    return row[0] if row else None


def refreshing(conn: apsw.Connection) -> int:
    """Contents embedded from their first 256 tokens only that wait for their other pieces."""
    return conn.execute(queries("semantic")["refresh_count"]).fetchone()[0]


def adopt(conn: apsw.Connection, fingerprint: str, now: str, earlier: str | None = None) -> bool:
    """Make `fingerprint` the archive's: vectors of another model are dropped and every window
    queued again; vectors of `earlier` (the same graph, each text cut at its first piece) are kept
    and the contents that may be longer queued for their other pieces. Returns True when vectors
    of another model were dropped."""
    sql = queries("semantic")
    if stored_fingerprint(conn) == fingerprint:
        return False
    with write_transaction(conn):
        previous = stored_fingerprint(conn)
        if previous == fingerprint:  # another process adopted it first
            return False
        if previous is not None and previous == earlier:
            conn.execute(sql["refresh_long"], {"bytes": MAX_TOKENS - 2})
            conn.execute(sql["set_fingerprint"], (fingerprint,))
            return False
        conn.execute(sql["clear_vector_bits"])
        conn.execute(sql["clear_vectors"])
        conn.execute(sql["clear_embeddings"])
        conn.execute(sql["enqueue_all"], {"now": now})
        conn.execute(sql["set_fingerprint"], (fingerprint,))
    return previous is not None


def drain(
    conn: apsw.Connection,
    model: Embedder,
    now: str,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Embed queued window contents, DRAIN_BATCH per transaction, at most `limit` in all; then,
    within the same `limit`, the other pieces of those waiting in `embedding_refresh`."""
    sql = queries("semantic")
    adopted = adopt(conn, model.fingerprint, now, model.files.earlier_fingerprint)
    waiting = pending(conn) + refreshing(conn)
    total = waiting if limit is None else min(limit, waiting)
    done = embedded = refreshed = 0
    while done < total:
        size = min(DRAIN_BATCH, total - done)
        batch = [r[0] for r in conn.execute(sql["next_batch"], (size,))]
        if batch:
            embedded += _embed_batch(conn, model, batch, now)
        else:
            batch = [r[0] for r in conn.execute(sql["refresh_batch"], (size,))]
            if not batch:
                break
            refreshed += _embed_batch(conn, model, batch, now, refresh=True)
        done += len(batch)
        if progress:
            progress(done, total)
    return {
        "embedded": embedded,
        "pending": pending(conn),
        "refreshed": refreshed,
        "refreshing": refreshing(conn),
        "fingerprint": model.fingerprint,
        "modelChanged": adopted,
    }


def _texts(conn: apsw.Connection, batch: list[bytes]) -> dict[bytes, str]:
    """The text of each content some window still holds (a gone one is left out)."""
    sql = queries("semantic")
    texts = {}
    for content_hash in batch:
        window = conn.execute(sql["window_for_content"], {"hash": content_hash}).fetchone()
        if window:
            texts[content_hash] = window_text(conn, *window)
    return texts


def _embed_batch(conn: apsw.Connection, model: Embedder, batch: list[bytes], now: str, refresh: bool = False) -> int:
    """Embed the contents of `batch`, a vector a piece, and let them leave the queue; with
    `refresh`, only the pieces after the first (the vector they have) of those still waiting in
    `embedding_refresh` (a content of one piece has none). How many contents got vectors."""
    sql = queries("semantic")
    texts = _texts(conn, batch)
    contents = list(texts)
    vectors, owners, pieces = model.embed_pieces(list(texts.values()), start=1 if refresh else 0)  # outside the lock
    with write_transaction(conn):
        wanted = {contents[owner] for owner in owners}
        if refresh:  # another process may have embedded them (or a purge forgotten them) meanwhile
            wanted = {h for h in wanted if conn.execute(sql["refresh_due"], (h,)).fetchone()}
        for vector, owner, piece in zip(vectors, owners, pieces):
            if contents[owner] in wanted:
                store_vector(conn, contents[owner], vector, now, piece)
        conn.executemany(sql["refreshed" if refresh else "dequeue"], [(h,) for h in batch])
    return len(wanted)


def store_vector(conn: apsw.Connection, content_hash: bytes, vector: np.ndarray, now: str, piece: int = 0) -> None:
    """Record `vector` as the embedding of a window content's `piece` (unless another process did
    first), with its sign bits in every project holding the content; inside the caller's
    transaction."""
    sql = queries("semantic")
    conn.execute(sql["insert_embedding"], {"hash": content_hash, "piece": piece, "now": now})
    if conn.changes():
        stored = {"id": conn.last_insert_rowid(), "quantized": quantized(vector)}
        conn.execute(sql["insert_vector"], stored)
        bits_of = vector.astype("<f4").tobytes()  # the sign bits come from the float32 vector
        conn.execute(sql["scope_vector"], {"id": stored["id"], "vector": bits_of, "hash": content_hash})


# The shortlist by sign bits is OVERSAMPLE × k before rescoring with the int8 vectors: on
# LoCoMo's embedded turns and questions it keeps 0.992 of the exhaustive float32 top 20
# (× 8: 0.977), `python eval/perf/vectors.py --data …/locomo10.json`.
OVERSAMPLE = 16


def nearest_contents(
    conn: apsw.Connection, project_row: int | None, vector: np.ndarray, k: int, oversample: int = OVERSAMPLE
) -> list[tuple[int, float]]:
    """The `k` embedded contents of a project (of every project when None) nearest `vector`:
    (window_embeddings id, cosine distance), nearest first (sql/semantic.sql `nearest`)."""
    sql = queries("semantic")
    params = {
        "vector": vector.astype("<f4").tobytes(),
        "quantized": quantized(vector),
        "k": k,
        "shortlist": oversample * k,
    }
    packed = vector_blocks.shortlist(conn, project_row, params["vector"], params["shortlist"])
    params["ids"] = None if packed is None else orjson.dumps(packed).decode()
    if project_row is None:
        return list(conn.execute(sql["nearest_everywhere"], params))
    return list(conn.execute(sql["nearest"], {**params, "project": project_row}))


BACKGROUND_BATCH = 8  # window contents per background step: well under a second of work
CONVERT_PER_STEP = 20_000  # float32 vectors rewritten per step, in short transactions
BACKGROUND_IDLE_SECONDS = 2.0


class BackgroundEmbedder(DaemonWorker):
    """Drains the queue from a daemon thread of `cwa serve`, with its own connection, in small
    batches, pausing between them. It shares the process's model with requests; `cwa serve` makes
    that model single-threaded (models.run_single_threaded), so the worker's calls and a request's
    run side by side on a core each and requests never wait on it."""

    name = "cwa-embed"

    def __init__(self, path: str, clock: Callable[[], str]) -> None:
        super().__init__(path, BACKGROUND_IDLE_SECONDS)
        self.clock = clock
        self.embedded = 0
        self.model = None
        self.pack_due = True  # the packer's scan of unpacked rows runs only when it may find a block

    def step(self, conn: apsw.Connection) -> bool:
        # vectors stored as float32 before migration 0018 are rewritten first (no model needed)
        convert(conn, CONVERT_PER_STEP, self.stop.is_set)
        if self.pack_due:  # first what the archive holds, then only after steps that embedded
            self.pack_due = vector_blocks.pack(conn, stopped=self.stop.is_set) >= vector_blocks.PACK_PER_STEP
        try:
            files = active(self.path)
        except ModelUnavailable:  # no model: nothing to do, ever
            return vectors_to_convert(conn) > 0  # the worker goes on only while vectors wait to be converted
        # The archive adopts the model before its queue is read, as `drain` does: an archive with
        # no vectors yet (one from before the semantic index) or with another model's queues every
        # window — without loading the model when nothing is waiting.
        adopt(conn, files.fingerprint, self.clock(), files.earlier_fingerprint)
        if not pending(conn) and not refreshing(conn):
            return True
        if self.model is None or self.model.fingerprint != files.fingerprint:  # first, or a new variant
            try:
                self.model = embedder(files)  # the one requests use too (`cwa serve` runs it single-threaded)
            except Exception:  # a broken model: nothing to do, ever
                return False
        while not self.stop.is_set() and (pending(conn) or refreshing(conn)):
            try:
                drained = drain(conn, self.model, self.clock(), BACKGROUND_BATCH)
                embedded = drained["embedded"] + drained["refreshed"]
                self.embedded += embedded
                self.pack_due = self.pack_due or embedded > 0
            except apsw.BusyError:
                break  # a writer holds the lock: try again after the next pause
            self.stop.wait(0.05)
        return True
