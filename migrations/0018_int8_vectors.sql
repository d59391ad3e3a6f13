-- Vectors stored as int8 (384 bytes) instead of float32 (1,536 bytes): each vector scaled so its
-- largest component is ±127 (cwa/index/semantic.py `quantized`). Cosine distance does not care
-- about the scale; the rounding keeps 0.99 of the exhaustive float32 top 20 on LoCoMo after the
-- sign-bit shortlist (`python eval/perf/vectors.py --data …/locomo10.json`). A float32 vector
-- took a page of 4 KiB for every two (2,053 bytes a vector); about ten int8 ones fit a page.
-- The sign bits (window_vector_bits) stay as they were, from the float32 vectors.
CREATE TABLE window_vectors_int8 (
  id         INTEGER PRIMARY KEY,  -- window_embeddings.id
  embedding  BLOB NOT NULL         -- int8[384]
);
INSERT INTO window_vectors_int8 (id, embedding)
SELECT v.id, (
  SELECT vec_int8(json_group_array(CAST(round(e.value * 127.0 / s.largest) AS INTEGER)))
  FROM (SELECT max(max(abs(value)), 1e-30) AS largest FROM vec_each(v.embedding)) AS s,
       vec_each(v.embedding) AS e)
FROM window_vectors AS v;
DROP TABLE window_vectors;
ALTER TABLE window_vectors_int8 RENAME TO window_vectors;
