-- Packed sign-bit rows written compactly. Packing (0019) moved a block's bits out of their
-- `window_vector_bits` rows by updating each row in place to an empty `bits`: a 64-byte row shrunk
-- to about 12, and SQLite left the pages it had filled three quarters empty (about 55 bytes a
-- vector, 0.3 × the text of a short chat turn). Packing now deletes the rows and writes them
-- again (sql/semantic.sql `mark_packed`); this copies the table once, in key order, so an
-- existing archive's rows sit in full pages too. Same rows, same keys; only pages change.
CREATE TABLE window_vector_bits_compacted (
  project_id    INTEGER NOT NULL REFERENCES projects (id),
  embedding_id  INTEGER NOT NULL REFERENCES window_embeddings (id),
  bits          BLOB NOT NULL,  -- vec_quantize_binary(embedding): one sign bit per dimension; x'' once packed
  packed        INTEGER NOT NULL DEFAULT 0 CHECK (packed IN (0, 1)),
  PRIMARY KEY (project_id, embedding_id)
) WITHOUT ROWID;

INSERT INTO window_vector_bits_compacted (project_id, embedding_id, bits, packed)
SELECT project_id, embedding_id, bits, packed FROM window_vector_bits ORDER BY project_id, embedding_id;

DROP TABLE window_vector_bits;
ALTER TABLE window_vector_bits_compacted RENAME TO window_vector_bits;
CREATE INDEX window_vector_bits_by_embedding ON window_vector_bits (embedding_id);
CREATE INDEX window_vector_bits_unpacked ON window_vector_bits (project_id, embedding_id) WHERE packed = 0;
