-- Long windows embedded whole, a vector a piece. Until now a window's text was embedded from its
-- first 256 tokens (all the model reads at once) and the rest was cut off: a fact in the second
-- half of a long answer or a tool's output had no say in semantic search. Now a longer text is
-- embedded as pieces of 256 tokens (at most four, cwa/models.py), each a vector of its own, and a
-- window is as near a query as its nearest piece. `window_embeddings` keys a vector by content
-- and piece; the vectors kept are piece 0 (the first 256 tokens are exactly the first piece), and
-- `embedding_refresh` queues the contents whose windows may hold more, for their other pieces
-- (cwa/index/semantic.py `adopt`, once the archive adopts the new fingerprint).
--
-- `window_vector_bits` references `window_embeddings`, so both are copied aside, dropped and
-- made again (same ids, same rows; a table another references cannot be dropped first).
CREATE TEMP TABLE embeddings_before AS SELECT id, content_hash, embedded_at FROM window_embeddings;
CREATE TEMP TABLE bits_before AS SELECT project_id, embedding_id, bits, packed FROM window_vector_bits;
DROP TABLE window_vector_bits;
DROP TABLE window_embeddings;

CREATE TABLE window_embeddings (
  id            INTEGER PRIMARY KEY,   -- also the rowid of window_vectors
  content_hash  BLOB NOT NULL,         -- windows.content_hash
  piece         INTEGER NOT NULL DEFAULT 0 CHECK (piece >= 0),  -- 256 tokens each, in order
  embedded_at   TEXT NOT NULL,
  UNIQUE (content_hash, piece)
);
INSERT INTO window_embeddings (id, content_hash, piece, embedded_at)
SELECT id, content_hash, 0, embedded_at FROM temp.embeddings_before ORDER BY id;

CREATE TABLE window_vector_bits (
  project_id    INTEGER NOT NULL REFERENCES projects (id),
  embedding_id  INTEGER NOT NULL REFERENCES window_embeddings (id),
  bits          BLOB NOT NULL,  -- vec_quantize_binary(embedding): one sign bit per dimension; x'' once packed
  packed        INTEGER NOT NULL DEFAULT 0 CHECK (packed IN (0, 1)),
  PRIMARY KEY (project_id, embedding_id)
) WITHOUT ROWID;
INSERT INTO window_vector_bits (project_id, embedding_id, bits, packed)
SELECT project_id, embedding_id, bits, packed FROM temp.bits_before ORDER BY project_id, embedding_id;
CREATE INDEX window_vector_bits_by_embedding ON window_vector_bits (embedding_id);
CREATE INDEX window_vector_bits_unpacked ON window_vector_bits (project_id, embedding_id) WHERE packed = 0;

DROP TABLE temp.embeddings_before;
DROP TABLE temp.bits_before;

-- Contents embedded from their first 256 tokens only that may hold more: their other pieces are
-- embedded once the embedding queue is empty (one that fits in a piece just leaves).
CREATE TABLE embedding_refresh (
  content_hash  BLOB PRIMARY KEY  -- window_embeddings.content_hash
) WITHOUT ROWID;
