-- A chunk found by the first 8 bytes of its digest. `chunks` held its 32-byte blake3 digest UNIQUE,
-- so an automatic index held it again: about 45 bytes a chunk, 0.32 × the text of LoCoMo-shaped
-- turns, whose documents are a chunk each. An index of the first 8 bytes finds a chunk as well;
-- admission compares the whole digest before it stores a chunk again (sql/admission.sql), inside
-- its write transaction, so a content is still stored once.
--
-- A UNIQUE constraint is part of the table, so the table is made again: the old one renamed away
-- (which points `document_chunks` at it), the new one filled from it in id order. `document_chunks`
-- is made again too, to point at the new table, and then the old tables go. The view that reads
-- chunks goes first and comes back on open (sql/views.sql). One transaction: a killed process
-- leaves schema 31, and the next open copies again from the start.
DROP VIEW IF EXISTS document_texts;
DELETE FROM meta WHERE key = 'views_digest';

ALTER TABLE chunks RENAME TO chunks_unique;
CREATE TABLE chunks (
  id           INTEGER PRIMARY KEY,
  hash         BLOB NOT NULL,     -- blake3 of data (32 bytes)
  byte_length  INTEGER NOT NULL,
  data         BLOB NOT NULL      -- last, so reading hash/length never loads the payload
);
INSERT INTO chunks (id, hash, byte_length, data)
SELECT id, hash, byte_length, data FROM chunks_unique ORDER BY id;

ALTER TABLE document_chunks RENAME TO document_chunks_unique;
CREATE TABLE document_chunks (
  document_row  INTEGER NOT NULL REFERENCES documents (id),
  ordinal       INTEGER NOT NULL,
  chunk_id      INTEGER NOT NULL REFERENCES chunks (id),
  start_byte    INTEGER NOT NULL,
  end_byte      INTEGER NOT NULL,
  PRIMARY KEY (document_row, ordinal)
) WITHOUT ROWID;
INSERT INTO document_chunks (document_row, ordinal, chunk_id, start_byte, end_byte)
SELECT document_row, ordinal, chunk_id, start_byte, end_byte FROM document_chunks_unique
ORDER BY document_row, ordinal;

DROP TABLE document_chunks_unique;
DROP TABLE chunks_unique;
CREATE INDEX document_chunks_chunk ON document_chunks (chunk_id);
CREATE INDEX chunks_hash_prefix ON chunks (substr(hash, 1, 8));
