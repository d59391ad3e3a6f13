-- Named queries of the semantic index (cwa/index/semantic.py, cwa/retrieve/semantic.py).
-- Tables: migrations/0004_semantic_index.sql.

-- name: enqueue_document
-- The document's window contents that have no embedding yet.
INSERT OR IGNORE INTO embedding_queue (content_hash, enqueued_at)
SELECT DISTINCT w.content_hash, strftime('%Y-%m-%dT%H:%M:%fZ', 'now') FROM windows AS w
WHERE w.document_row = :row
  AND NOT EXISTS (SELECT 1 FROM window_embeddings AS e WHERE e.content_hash = w.content_hash);

-- name: enqueue_all
INSERT OR IGNORE INTO embedding_queue (content_hash, enqueued_at)
SELECT DISTINCT w.content_hash, :now FROM windows AS w
WHERE NOT EXISTS (SELECT 1 FROM window_embeddings AS e WHERE e.content_hash = w.content_hash);

-- name: pending_count
SELECT count(*) FROM embedding_queue;

-- name: embedded_count
SELECT count(*) FROM window_embeddings;

-- name: next_batch
SELECT content_hash FROM embedding_queue ORDER BY enqueued_at, content_hash LIMIT ?;

-- name: window_for_content
SELECT document_row, start_byte, end_byte, first_message, last_message FROM windows
WHERE content_hash = ? LIMIT 1;

-- name: insert_embedding
INSERT OR IGNORE INTO window_embeddings (content_hash, embedded_at) VALUES (?, ?);

-- name: insert_vector
INSERT INTO window_vectors (rowid, embedding) VALUES (?, ?);

-- name: dequeue
DELETE FROM embedding_queue WHERE content_hash = ?;

-- name: clear_embeddings
DELETE FROM window_embeddings;

-- name: clear_vectors
DELETE FROM window_vectors;

-- name: fingerprint
SELECT value FROM meta WHERE key = 'embedding_fingerprint';

-- name: set_fingerprint
INSERT INTO meta (key, value) VALUES ('embedding_fingerprint', ?)
ON CONFLICT (key) DO UPDATE SET value = excluded.value;

-- name: nearest
-- Phase 1: the nearest embedded contents to a query vector, across the archive.
SELECT rowid, distance FROM window_vectors WHERE embedding MATCH :vector AND k = :k;

-- name: windows_of_contents
-- The windows holding the nearest contents (:ids is a JSON array of window_embeddings ids); the
-- scope, state and visibility filter is search.sql's `admissible_windows`, shared with BM25F.
SELECT e.id, w.id FROM window_embeddings AS e
JOIN windows AS w ON w.content_hash = e.content_hash
WHERE e.id IN (SELECT value FROM json_each(:ids));

-- name: sample_windows
-- Live windows to benchmark an embedding variant on: one per distinct content, in a stable
-- order unrelated to time (by content hash).
SELECT min(w.document_row), w.start_byte, w.end_byte, w.first_message, w.last_message
FROM windows AS w
JOIN documents AS d ON d.id = w.document_row AND d.state = 'live'
GROUP BY w.content_hash
ORDER BY w.content_hash
LIMIT ?;
