"""The semantic index: window embeddings, filled off the admission path.

Admission only enqueues (the `semantic` handler: window contents without a vector) and gives the
document's project the sign bits of contents already embedded; `drain`
embeds a bounded batch at a time (`cwa index embed`, and `cwa serve` in the background). Vectors
are keyed by window content hash, so identical windows share one and a rebuild re-embeds nothing.
The archive records the model fingerprint its vectors came from; when the installed model's
fingerprint differs, the old vectors are dropped and every window is queued again, never mixed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import apsw
import orjson

from cwa.model_variants import active
from cwa.models import Embedder, ModelUnavailable, embedder
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


def adopt(conn: apsw.Connection, fingerprint: str, now: str) -> bool:
    """Make `fingerprint` the archive's: vectors of another model are dropped and every window
    queued again. Returns True when vectors of another model were dropped."""
    sql = queries("semantic")
    if stored_fingerprint(conn) == fingerprint:
        return False
    with write_transaction(conn):
        previous = stored_fingerprint(conn)
        if previous == fingerprint:  # another process adopted it first
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
    """Embed queued window contents, DRAIN_BATCH per transaction, at most `limit` in all."""
    sql = queries("semantic")
    adopted = adopt(conn, model.fingerprint, now)
    total = pending(conn) if limit is None else min(limit, pending(conn))
    done = 0
    while done < total:
        batch = [r[0] for r in conn.execute(sql["next_batch"], (min(DRAIN_BATCH, total - done),))]
        if not batch:
            break
        texts: dict[str, str | None] = {}
        for content_hash in batch:
            window = conn.execute(sql["window_for_content"], (content_hash,)).fetchone()
            texts[content_hash] = window_text(conn, *window) if window else None  # gone: just dequeue
        present = [h for h, t in texts.items() if t is not None]
        vectors = model.embed([texts[h] for h in present])  # outside the write lock
        with write_transaction(conn):
            for content_hash, vector in zip(present, vectors):
                store_vector(conn, content_hash, vector, now)
            conn.executemany(sql["dequeue"], [(h,) for h in batch])
        done += len(batch)
        if progress:
            progress(done, total)
    return {"embedded": done, "pending": pending(conn), "fingerprint": model.fingerprint, "modelChanged": adopted}


def store_vector(conn: apsw.Connection, content_hash: bytes, vector: np.ndarray, now: str) -> None:
    """Record `vector` as the embedding of a window content (unless another process did first),
    with its sign bits in every project holding the content; inside the caller's transaction."""
    sql = queries("semantic")
    conn.execute(sql["insert_embedding"], (content_hash, now))
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
        adopt(conn, files.fingerprint, self.clock())
        if not pending(conn):
            return True
        if self.model is None or self.model.fingerprint != files.fingerprint:  # first, or a new variant
            try:
                self.model = embedder(files)  # the one requests use too (`cwa serve` runs it single-threaded)
            except Exception:  # a broken model: nothing to do, ever
                return False
        while not self.stop.is_set() and pending(conn):
            try:
                embedded = drain(conn, self.model, self.clock(), BACKGROUND_BATCH)["embedded"]
                self.embedded += embedded
                self.pack_due = self.pack_due or embedded > 0
            except apsw.BusyError:
                break  # a writer holds the lock: try again after the next pause
            self.stop.wait(0.05)
        return True
