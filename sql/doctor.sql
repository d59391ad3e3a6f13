-- `cwa doctor`: the archive's health, read only (cwa/store/doctor.py).

-- name: indexable_count
SELECT count(*) FROM documents AS d WHERE state IN ('live', 'superseded')
  AND (kind != 'checkpoint-part' OR EXISTS (SELECT 1 FROM checkpoint_parts AS c WHERE c.part_row = d.id));

-- name: unindexed_count
-- Documents that should have derived rows but were never indexed (and are not waiting in the
-- index queue, nor parts of a root that is).
SELECT count(*) FROM documents AS d WHERE state IN ('live', 'superseded') AND index_generation IS NULL
  AND NOT EXISTS (SELECT 1 FROM index_queue AS q WHERE q.document_row = d.id)
  AND (kind != 'checkpoint-part' OR EXISTS (SELECT 1 FROM checkpoint_parts AS c WHERE c.part_row = d.id
        AND NOT EXISTS (SELECT 1 FROM index_queue AS q WHERE q.document_row = c.root_row)));

-- name: queued_count
SELECT count(*) FROM index_queue;

-- name: without_windows
-- Indexed documents with text but no window: their lexical rows are missing.
SELECT count(*) FROM documents AS d WHERE state IN ('live', 'superseded') AND byte_length > 0
  AND index_generation IS NOT NULL
  AND (kind != 'checkpoint-part' OR EXISTS (SELECT 1 FROM checkpoint_parts AS c WHERE c.part_row = d.id))
  AND NOT EXISTS (SELECT 1 FROM windows AS w WHERE w.document_row = d.id);

-- name: window_totals
SELECT (SELECT count(*) FROM windows), (SELECT value FROM index_stats WHERE name = 'windows'),
       (SELECT count(*) FROM window_fts_docsize);

-- name: window_ranges
-- Each project's windows (smallest and largest id, count) against its kept range (NULL: none),
-- and the windows of other projects inside that range (indexed before window id blocks).
SELECT p.identity, w.low, w.high, s.low, s.high,
       (SELECT count(*) FROM windows AS x WHERE x.id BETWEEN coalesce(s.low, w.low) AND coalesce(s.high, w.high))
         - w.windows
FROM (SELECT d.project_id, min(w.id) AS low, max(w.id) AS high, count(*) AS windows
      FROM windows AS w JOIN documents AS d ON d.id = w.document_row GROUP BY d.project_id) AS w
JOIN projects AS p ON p.id = w.project_id
LEFT JOIN project_window_spans AS s ON s.project_row = w.project_id
ORDER BY p.identity;

-- name: sample_documents
SELECT id, document_id, version, byte_length, (SELECT text_digest FROM document_digests WHERE document_row = d.id)
FROM documents AS d
WHERE state IN ('live', 'superseded') ORDER BY random() LIMIT :limit;

-- name: sample_windows
SELECT w.document_row, w.start_byte, w.end_byte, w.content_hash FROM windows AS w
JOIN documents AS d ON d.id = w.document_row AND d.state IN ('live', 'superseded')
ORDER BY random() LIMIT :limit;

-- name: chunks_with_payload
-- Every chunk with its bytes, once, in row order (doctor checks each against its digest).
SELECT id, hash, byte_length, data FROM chunks ORDER BY id;

-- name: documents_of_chunks
-- The readable documents holding any of the chunks :ids (a JSON array).
SELECT DISTINCT d.document_id, d.version FROM document_chunks AS dc
JOIN documents AS d ON d.id = dc.document_row
WHERE dc.chunk_id IN (SELECT value FROM json_each(:ids)) AND d.state IN ('live', 'superseded')
ORDER BY d.id;

-- name: broken_documents
-- Readable documents whose chunk ranges do not rebuild their bytes: a range whose chunk row is
-- gone or of another length, a gap or overlap between consecutive ranges, or an end that is not
-- the document's length.
WITH ranges AS (
  SELECT dc.document_row, dc.end_byte,
         c.id IS NULL OR dc.end_byte - dc.start_byte <> c.byte_length
           OR dc.start_byte <> lag(dc.end_byte, 1, 0) OVER (PARTITION BY dc.document_row ORDER BY dc.ordinal) AS bad
  FROM document_chunks AS dc LEFT JOIN chunks AS c ON c.id = dc.chunk_id),
per_document AS (
  SELECT document_row, max(bad) AS bad, max(end_byte) AS last_end FROM ranges GROUP BY document_row)
SELECT d.document_id, d.version FROM documents AS d
LEFT JOIN per_document AS p ON p.document_row = d.id
WHERE d.state IN ('live', 'superseded') AND (coalesce(p.bad, 0) OR coalesce(p.last_end, 0) <> d.byte_length)
ORDER BY d.id;
