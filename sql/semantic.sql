-- Named queries of the semantic index (cwa/index/semantic.py, cwa/retrieve/semantic.py).
-- Tables: migrations/0004_semantic_index.sql, 0016_vector_shortlists.sql, 0018_int8_vectors.sql.
--
-- A content's windows and vectors are found through the first 8 bytes of its digest (migrations
-- 0031, 0034): a statement seeking them by content says `substr(w.content_hash, 1, 8) = substr(X,
-- 1, 8) AND w.content_hash = X`, the first for the index (`windows_content_prefix`,
-- `window_embeddings_content`), the second for the answer. tests/test_schema.py checks each
-- such statement's plan.

-- name: enqueue_document
-- The document's window contents that have no embedding yet (a content once: OR IGNORE, no sort
-- for DISTINCT).
INSERT OR IGNORE INTO embedding_queue (content_hash, enqueued_at)
SELECT w.content_hash, strftime('%Y-%m-%dT%H:%M:%fZ', 'now') FROM windows AS w
WHERE w.document_row = :row
  AND NOT EXISTS (SELECT 1 FROM window_embeddings AS e
                  WHERE substr(e.content_hash, 1, 8) = substr(w.content_hash, 1, 8) AND e.content_hash = w.content_hash);

-- name: document_window_count
SELECT count(*) FROM windows WHERE document_row = :row;

-- name: scope_document
-- The document's project gets the sign bits of its window contents already embedded (for
-- another document, maybe of another project): its searches then find them. The bits are the
-- ones another project has in a row (made from the float32 vector; a packed row's are in its
-- block), else the stored vector's signs.
INSERT OR IGNORE INTO window_vector_bits (project_id, embedding_id, bits)
SELECT DISTINCT d.project_id, e.id, coalesce(
  (SELECT b.bits FROM window_vector_bits AS b WHERE b.embedding_id = e.id AND b.packed = 0 LIMIT 1),
  (SELECT vec_quantize_binary(vec_int8(v.embedding)) FROM window_vectors AS v WHERE v.id = e.id),
  (SELECT vec_quantize_binary(f.embedding) FROM window_vectors_float32 AS f WHERE f.id = e.id))
FROM windows AS w
JOIN documents AS d ON d.id = w.document_row
JOIN window_embeddings AS e
  ON substr(e.content_hash, 1, 8) = substr(w.content_hash, 1, 8) AND e.content_hash = w.content_hash
WHERE w.document_row = :row
  AND (EXISTS (SELECT 1 FROM window_vectors AS v WHERE v.id = e.id)
       OR EXISTS (SELECT 1 FROM window_vectors_float32 AS f WHERE f.id = e.id));

-- name: enqueue_all
INSERT OR IGNORE INTO embedding_queue (content_hash, enqueued_at)
SELECT w.content_hash, :now FROM windows AS w  -- a content once: OR IGNORE, no sort for DISTINCT
WHERE NOT EXISTS (SELECT 1 FROM window_embeddings AS e
                  WHERE substr(e.content_hash, 1, 8) = substr(w.content_hash, 1, 8) AND e.content_hash = w.content_hash);

-- name: pending_count
SELECT count(*) FROM embedding_queue;

-- name: next_batch
SELECT content_hash FROM embedding_queue ORDER BY enqueued_at, content_hash LIMIT ?;

-- name: window_for_content
SELECT document_row, start_byte, end_byte, first_message, last_message FROM windows
WHERE substr(content_hash, 1, 8) = substr(:hash, 1, 8) AND content_hash = :hash LIMIT 1;

-- name: insert_embedding
-- A content's piece has one vector: none is stored where one is (another process was first).
INSERT INTO window_embeddings (content_hash, piece, embedded_at)
SELECT :hash, :piece, round(unixepoch(:now, 'subsec') * 1000)
WHERE NOT EXISTS (SELECT 1 FROM window_embeddings
                  WHERE substr(content_hash, 1, 8) = substr(:hash, 1, 8) AND piece = :piece AND content_hash = :hash);

-- name: insert_vector
INSERT INTO window_vectors (id, embedding) VALUES (:id, :quantized);

-- name: scope_vector
-- The new vector's sign bits, in every project holding a window with its content.
INSERT OR IGNORE INTO window_vector_bits (project_id, embedding_id, bits)
SELECT DISTINCT d.project_id, :id, vec_quantize_binary(:vector)
FROM windows AS w JOIN documents AS d ON d.id = w.document_row
WHERE substr(w.content_hash, 1, 8) = substr(:hash, 1, 8) AND w.content_hash = :hash;

-- name: dequeue
DELETE FROM embedding_queue WHERE content_hash = ?;

-- name: clear_embeddings
DELETE FROM window_embeddings;

-- name: clear_vectors
DELETE FROM window_vectors;
DELETE FROM window_vectors_float32;

-- name: clear_vector_bits
DELETE FROM window_vector_bits;
DELETE FROM window_vector_blocks;

-- name: fingerprint
SELECT value FROM meta WHERE key = 'embedding_fingerprint';

-- name: set_fingerprint
INSERT INTO meta (key, value) VALUES ('embedding_fingerprint', ?)
ON CONFLICT (key) DO UPDATE SET value = excluded.value;

-- name: nearest
-- Phase 1: the project's embedded contents nearest a query vector. The sign bits of the
-- project's vectors (one contiguous range) give a shortlist by Hamming distance; the int8
-- vectors of the shortlist and the query's (:quantized) give the cosine distances, nearest first
-- (a float32 vector not converted yet, cwa/store/vector_format.py, is compared with :vector).
-- When the shortlist was taken from the project's packed blocks (:ids, a JSON array; else NULL,
-- cwa/store/vector_blocks.py), only those the project still holds are rescored.
WITH scanned AS MATERIALIZED (
  SELECT embedding_id FROM window_vector_bits
  WHERE project_id = :project AND :ids IS NULL
  ORDER BY vec_distance_hamming(vec_bit(bits), vec_quantize_binary(:vector))
  LIMIT :shortlist
), shortlist AS MATERIALIZED (
  SELECT embedding_id FROM scanned
  UNION ALL
  SELECT b.embedding_id FROM json_each(coalesce(:ids, '[]')) AS given  -- each id looked up in turn
  CROSS JOIN window_vector_bits AS b ON b.project_id = :project AND b.embedding_id = given.value
)
SELECT id, distance FROM (
  SELECT v.id, vec_distance_cosine(vec_int8(v.embedding), vec_int8(:quantized)) AS distance
  FROM shortlist JOIN window_vectors AS v ON v.id = shortlist.embedding_id
  UNION ALL
  SELECT f.id, vec_distance_cosine(f.embedding, :vector)
  FROM shortlist JOIN window_vectors_float32 AS f ON f.id = shortlist.embedding_id)
ORDER BY distance, id LIMIT :k;

-- name: nearest_everywhere
-- The same across every project (a content two projects hold is one candidate; a shortlist from
-- the blocks, :ids, keeps the ids some project still holds).
WITH scanned AS MATERIALIZED (
  SELECT DISTINCT embedding_id FROM (
    SELECT embedding_id FROM window_vector_bits
    WHERE :ids IS NULL
    ORDER BY vec_distance_hamming(vec_bit(bits), vec_quantize_binary(:vector))
    LIMIT :shortlist
  )
), shortlist AS MATERIALIZED (
  SELECT embedding_id FROM scanned
  UNION ALL
  SELECT given.value FROM json_each(coalesce(:ids, '[]')) AS given
  WHERE EXISTS (SELECT 1 FROM window_vector_bits AS b WHERE b.embedding_id = given.value)
)
SELECT id, distance FROM (
  SELECT v.id, vec_distance_cosine(vec_int8(v.embedding), vec_int8(:quantized)) AS distance
  FROM shortlist JOIN window_vectors AS v ON v.id = shortlist.embedding_id
  UNION ALL
  SELECT f.id, vec_distance_cosine(f.embedding, :vector)
  FROM shortlist JOIN window_vectors_float32 AS f ON f.id = shortlist.embedding_id)
ORDER BY distance, id LIMIT :k;

-- name: windows_of_contents
-- The windows holding the nearest contents (:ids is a JSON array of window_embeddings ids, one
-- a piece: a window holding several is as near as its nearest, cwa/retrieve/semantic.py); the
-- scope, state and visibility filter is search.sql's `admissible_windows`, shared with BM25F.
SELECT e.id, w.id FROM window_embeddings AS e
JOIN windows AS w
  ON substr(w.content_hash, 1, 8) = substr(e.content_hash, 1, 8) AND w.content_hash = e.content_hash
WHERE e.id IN (SELECT value FROM json_each(:ids));

-- name: sample_windows
-- Live windows to benchmark an embedding variant on: one per distinct content, in a stable
-- order unrelated to time (by content hash). Grouped by the digest's first 8 bytes, the order of
-- `windows_content_prefix`, so the scan stops after the sample without sorting every window (two
-- contents sharing a prefix, about 3 chances in 10^8 among a million, give one sample window).
SELECT min(w.document_row), w.start_byte, w.end_byte, w.first_message, w.last_message
FROM windows AS w
JOIN documents AS d ON d.id = w.document_row AND d.state = 'live'
GROUP BY substr(w.content_hash, 1, 8)
ORDER BY substr(w.content_hash, 1, 8)
LIMIT ?;

-- name: vectors_to_convert
-- At most how many float32 vectors wait for the conversion (their ids' span: no scan).
SELECT coalesce(max(id) - min(id) + 1, 0) FROM window_vectors_float32;

-- name: next_float32_vectors
-- The next float32 vectors to convert, in id order (converted ones leave the table).
SELECT id, embedding FROM window_vectors_float32 ORDER BY id LIMIT :limit;

-- name: drop_converted
-- Converted vectors out of the float32 table (its pages go back to the file with the next maintenance).
DELETE FROM window_vectors_float32 WHERE id BETWEEN :first AND :last;

-- name: query_bits
-- A query vector's sign bits, as `scope_vector` makes a window's.
SELECT vec_quantize_binary(:vector);

-- name: project_blocks
SELECT ids, bits FROM window_vector_blocks WHERE project_id = :project;

-- name: every_block
SELECT ids, bits FROM window_vector_blocks;

-- name: unpacked_distances
-- The project's sign bits not in a block yet, with their Hamming distance to the query's.
SELECT embedding_id, vec_distance_hamming(vec_bit(bits), vec_bit(:bits))
FROM window_vector_bits INDEXED BY window_vector_bits_unpacked
WHERE project_id = :project AND packed = 0;

-- name: every_unpacked_distance
SELECT embedding_id, vec_distance_hamming(vec_bit(bits), vec_bit(:bits))
FROM window_vector_bits INDEXED BY window_vector_bits_unpacked
WHERE packed = 0;

-- name: packable_projects
-- The projects with at least a whole block of unpacked sign bits, and how many they have.
SELECT project_id, count(*) FROM window_vector_bits WHERE packed = 0
GROUP BY project_id HAVING count(*) >= :block;

-- name: unpacked_first
SELECT embedding_id, bits FROM window_vector_bits INDEXED BY window_vector_bits_unpacked
WHERE project_id = :project AND packed = 0 AND length(bits) = :width
ORDER BY embedding_id LIMIT :block;

-- name: insert_block
INSERT INTO window_vector_blocks (project_id, ids, bits) VALUES (:project, :ids, :bits);

-- name: mark_packed
-- Their bits are in the block now: the row keeps which project holds which vector. Deleted and
-- written again rather than updated: shrunk in place, 64-byte rows leave their pages three
-- quarters empty (migration 0028).
DELETE FROM window_vector_bits
WHERE project_id = :project AND embedding_id IN (SELECT value FROM json_each(:ids));
INSERT INTO window_vector_bits (project_id, embedding_id, bits, packed)
SELECT :project, value, x'', 1 FROM json_each(:ids);

-- name: refresh_long
-- An archive embedded when each text was cut at its first 256 tokens: the contents whose windows
-- may hold more, for their other pieces (cwa/index/semantic.py `adopt`). A text of at most :bytes
-- bytes has at most as many tokens besides [CLS] and [SEP]: one piece, which it has.
INSERT OR IGNORE INTO embedding_refresh (content_hash)
SELECT w.content_hash FROM windows AS w  -- a content once: OR IGNORE
WHERE w.end_byte - w.start_byte > :bytes
  AND EXISTS (SELECT 1 FROM window_embeddings AS e
              WHERE substr(e.content_hash, 1, 8) = substr(w.content_hash, 1, 8) AND e.content_hash = w.content_hash);

-- name: refresh_count
SELECT count(*) FROM embedding_refresh;

-- name: refresh_batch
SELECT content_hash FROM embedding_refresh LIMIT ?;

-- name: refresh_due
-- Still waiting for its other pieces (another process may have embedded them first).
SELECT 1 FROM embedding_refresh WHERE content_hash = ?;

-- name: refreshed
DELETE FROM embedding_refresh WHERE content_hash = ?;

-- name: near_windows
-- The live windows of session :session with ids from :low to :high (cwa/retrieve/semantic.py
-- `common_near`): read by that id range (`+` keeps a long session's documents from being walked).
SELECT count(*)
FROM windows AS w
JOIN documents AS d ON d.id = w.document_row
WHERE w.id BETWEEN :low AND :high AND +d.session_id = :session AND d.state = 'live';

-- name: near_term_windows
-- Of those, the windows whose own text holds :term (an FTS5 phrase).
SELECT count(*)
FROM window_fts
JOIN windows AS w ON w.id = window_fts.rowid
JOIN documents AS d ON d.id = w.document_row
WHERE window_fts MATCH :term AND window_fts.rowid BETWEEN :low AND :high
  AND d.session_id = :session AND d.state = 'live';
