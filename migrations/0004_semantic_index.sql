-- The semantic index: window embeddings in sqlite-vec, keyed by the window's content hash so
-- identical windows share one vector and `cwa index rebuild` (which renumbers windows but keeps
-- their bytes) re-embeds nothing. Embedding runs off the admission path: admission enqueues,
-- `cwa index embed` and `cwa serve` drain the queue.

-- One row per embedded window content, for the model fingerprint in meta `embedding_fingerprint`.
CREATE TABLE window_embeddings (
  id            INTEGER PRIMARY KEY,   -- also the rowid of window_vectors
  content_hash  TEXT NOT NULL UNIQUE,  -- windows.content_hash
  embedded_at   TEXT NOT NULL
);

CREATE VIRTUAL TABLE window_vectors USING vec0 (
  embedding float[384] distance_metric=cosine
);

-- Window contents waiting for an embedding (one row per distinct content; the text is read from
-- any window holding it when the queue is drained).
CREATE TABLE embedding_queue (
  content_hash  TEXT PRIMARY KEY,
  enqueued_at   TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX embedding_queue_order ON embedding_queue (enqueued_at);
