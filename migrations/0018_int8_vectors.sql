-- Vectors are stored as int8 (384 bytes) instead of float32 (1,536 bytes): each vector scaled so
-- its largest component is ±127 (cwa/store/vector_format.py). Cosine distance does not care about
-- the scale; rescoring the sign-bit shortlist with int8 keeps 0.99 of the exhaustive float32 top
-- 20 on LoCoMo (`python eval/perf/vectors.py --data …/locomo10.json`). A float32 vector took a
-- page of 4 KiB for every two (2,053 bytes a vector); about ten int8 ones fit a page.
--
-- The float32 vectors already stored are not rewritten here (a million of them take minutes, and
-- every process opening the archive would wait): they move, as they are, to
-- `window_vectors_float32`, which search reads beside `window_vectors` until a background
-- conversion has moved each, in short batches, into the new table as int8 (then it stays empty).
-- This schema version also keeps an older cwa from reading int8 vectors as float32.
ALTER TABLE window_vectors RENAME TO window_vectors_float32;
CREATE TABLE window_vectors (
  id         INTEGER PRIMARY KEY,  -- window_embeddings.id
  embedding  BLOB NOT NULL         -- int8[384]
);
