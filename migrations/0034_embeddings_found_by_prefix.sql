-- A vector's content found by the first 8 bytes of its digest, and its time an integer.
-- `window_embeddings` held each content's 32-byte digest UNIQUE with the piece, so an automatic
-- index held the digest again (about 46 bytes a vector, 0.32 × the text of LoCoMo-shaped turns),
-- and `embedded_at` as 24 characters of ISO-8601 text. An index of the digest's first 8 bytes and
-- the piece finds a vector as well: the embedder looks before it stores one (sql/semantic.sql),
-- inside its write transaction, so a content's piece still has one vector; `embedded_at` becomes
-- epoch milliseconds, as a document's times did in migration 0030 (nothing reads it but SQL).
--
-- `window_vector_bits` references `window_embeddings`, so both are copied aside, dropped and
-- made again (same ids, same rows), as in migration 0029. One transaction: a killed process
-- leaves schema 33, and the next open copies again from the start.
CREATE TEMP TABLE embeddings_before AS SELECT id, content_hash, piece, embedded_at FROM window_embeddings;
CREATE TEMP TABLE bits_before AS SELECT project_id, embedding_id, bits, packed FROM window_vector_bits;
DROP TABLE window_vector_bits;
DROP TABLE window_embeddings;

CREATE TABLE window_embeddings (
  id            INTEGER PRIMARY KEY,   -- also the rowid of window_vectors
  content_hash  BLOB NOT NULL,         -- windows.content_hash
  piece         INTEGER NOT NULL DEFAULT 0 CHECK (piece >= 0),  -- 256 tokens each, in order
  embedded_at   INTEGER NOT NULL       -- epoch milliseconds
);
INSERT INTO window_embeddings (id, content_hash, piece, embedded_at)
SELECT id, content_hash, piece, coalesce(round(unixepoch(embedded_at, 'subsec') * 1000), 0)
FROM temp.embeddings_before ORDER BY id;
CREATE INDEX window_embeddings_content ON window_embeddings (substr(content_hash, 1, 8), piece);

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
