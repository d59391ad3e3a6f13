-- Vector search that does not scan the world (cwa/retrieve/semantic.py): a search reads the
-- 48-byte sign bits of its own project's vectors only, keeps the nearest by Hamming distance,
-- and rescores that shortlist with the exact float32 vectors.
--
-- The float32 vectors leave sqlite-vec's vec0 table (an exhaustive scan of every project's
-- vectors, and a read by rowid through its chunk tables) for a plain table under the same name and
-- columns: the rescoring and the ranker read vectors by id.
CREATE TABLE window_vectors_plain (
  id         INTEGER PRIMARY KEY,  -- window_embeddings.id
  embedding  BLOB NOT NULL         -- float32[384], little-endian, unit length
);
INSERT INTO window_vectors_plain (id, embedding) SELECT rowid, embedding FROM window_vectors;
DROP TABLE window_vectors;
ALTER TABLE window_vectors_plain RENAME TO window_vectors;

-- An embedding row whose vector was missing: its content is embedded again.
INSERT OR IGNORE INTO embedding_queue (content_hash, enqueued_at)
SELECT e.content_hash, strftime('%Y-%m-%dT%H:%M:%fZ', 'now') FROM window_embeddings AS e
WHERE NOT EXISTS (SELECT 1 FROM window_vectors AS v WHERE v.id = e.id);
DELETE FROM window_embeddings WHERE NOT EXISTS (SELECT 1 FROM window_vectors AS v WHERE v.id = window_embeddings.id);

-- One row per project holding a window with the embedded content (a content shared by two
-- projects has a row in each). Clustered by project: a search reads one contiguous range.
CREATE TABLE window_vector_bits (
  project_id    INTEGER NOT NULL REFERENCES projects (id),
  embedding_id  INTEGER NOT NULL REFERENCES window_embeddings (id),
  bits          BLOB NOT NULL,  -- vec_quantize_binary(embedding): one sign bit per dimension
  PRIMARY KEY (project_id, embedding_id)
) WITHOUT ROWID;
CREATE INDEX window_vector_bits_by_embedding ON window_vector_bits (embedding_id);

INSERT OR IGNORE INTO window_vector_bits (project_id, embedding_id, bits)
SELECT DISTINCT d.project_id, e.id, vec_quantize_binary(v.embedding)
FROM window_embeddings AS e
JOIN window_vectors AS v ON v.id = e.id
JOIN windows AS w ON w.content_hash = e.content_hash
JOIN documents AS d ON d.id = w.document_row;
