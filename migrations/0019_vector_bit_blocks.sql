-- The sign bits of a large project packed BLOCK_VECTORS to a row (cwa/store/vector_blocks.py): a
-- semantic search then reads a million vectors' bits in a few hundred reads of 196 KB and scores
-- each block at once, instead of one B-tree row and one SQL function call per vector.
--
-- `window_vector_bits` stays the record of which project holds which vector: a block is a copy
-- of some of its rows (`packed = 1`), made in the background once a project has a whole block of
-- unpacked ones; the rest are scanned as before. A vector removed from the project later may
-- still be in a block; a search keeps only the ids `window_vector_bits` still holds.
ALTER TABLE window_vector_bits ADD COLUMN packed INTEGER NOT NULL DEFAULT 0 CHECK (packed IN (0, 1));
-- The rows still to scan, with their bits: what a search and the packer read of a large project.
CREATE INDEX window_vector_bits_unpacked ON window_vector_bits (project_id, embedding_id, bits) WHERE packed = 0;

CREATE TABLE window_vector_blocks (
  id          INTEGER PRIMARY KEY,
  project_id  INTEGER NOT NULL REFERENCES projects (id),
  ids         BLOB NOT NULL,  -- window_embeddings ids, int64 little-endian, ascending
  bits        BLOB NOT NULL   -- their sign bits in the same order, 48 bytes each
);
CREATE INDEX window_vector_blocks_project ON window_vector_blocks (project_id);
