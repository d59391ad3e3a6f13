-- `cwa doctor`: the archive's health, read only (cwa/store/doctor.py).

-- name: indexable_count
SELECT count(*) FROM documents AS d WHERE state IN ('live', 'superseded')
  AND (kind != 'checkpoint-part' OR EXISTS (SELECT 1 FROM checkpoint_parts AS c WHERE c.part_row = d.id));

-- name: unindexed_count
-- Documents that should have derived rows but were never indexed.
SELECT count(*) FROM documents AS d WHERE state IN ('live', 'superseded') AND index_generation IS NULL
  AND (kind != 'checkpoint-part' OR EXISTS (SELECT 1 FROM checkpoint_parts AS c WHERE c.part_row = d.id));

-- name: without_windows
-- Indexed documents with text but no window: their lexical rows are missing.
SELECT count(*) FROM documents AS d WHERE state IN ('live', 'superseded') AND byte_length > 0
  AND index_generation IS NOT NULL
  AND (kind != 'checkpoint-part' OR EXISTS (SELECT 1 FROM checkpoint_parts AS c WHERE c.part_row = d.id))
  AND NOT EXISTS (SELECT 1 FROM windows AS w WHERE w.document_row = d.id);

-- name: window_totals
SELECT (SELECT count(*) FROM windows), (SELECT value FROM index_stats WHERE name = 'windows'),
       (SELECT count(*) FROM window_fts_docsize);

-- name: sample_documents
SELECT id, document_id, version, byte_length, text_digest FROM documents
WHERE state IN ('live', 'superseded') ORDER BY random() LIMIT :limit;

-- name: sample_windows
SELECT w.document_row, w.start_byte, w.end_byte, w.content_hash FROM windows AS w
JOIN documents AS d ON d.id = w.document_row AND d.state IN ('live', 'superseded')
ORDER BY random() LIMIT :limit;
