-- The sign bits of a large project packed BLOCK_VECTORS to a row (cwa/store/vector_blocks.py): a
-- semantic search then reads a million vectors' bits in a few hundred reads of 196 KB and scores
-- each block at once, instead of one B-tree row and one SQL function call per vector.
--
-- `window_vector_bits` stays the record of which project holds which vector: once a project has
-- a whole block of unpacked rows, their bits move into a block (the rows keep `packed = 1` and an
-- empty `bits`), in the background; the rest are scanned as before. A vector removed from the
-- project later may still be in a block; a search keeps only the ids `window_vector_bits` holds.
ALTER TABLE window_vector_bits ADD COLUMN packed INTEGER NOT NULL DEFAULT 0 CHECK (packed IN (0, 1));
-- The rows still to scan: what a search and the packer read of a project with blocks (without
-- the bits: a small project's rows all stay unpacked, and their bits are not stored twice).
CREATE INDEX window_vector_bits_unpacked ON window_vector_bits (project_id, embedding_id) WHERE packed = 0;

CREATE TABLE window_vector_blocks (
  id          INTEGER PRIMARY KEY,
  project_id  INTEGER NOT NULL REFERENCES projects (id),
  ids         BLOB NOT NULL,  -- window_embeddings ids, int64 little-endian, ascending
  bits        BLOB NOT NULL   -- their sign bits in the same order, 48 bytes each
);
CREATE INDEX window_vector_blocks_project ON window_vector_blocks (project_id);
