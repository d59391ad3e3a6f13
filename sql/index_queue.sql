-- The index queue (cwa/store/index_queue.py, migration 0014).

-- name: enqueue
INSERT OR IGNORE INTO index_queue (document_row, project_id, queued_at) VALUES (?, ?, ?);

-- name: next_queued
-- The oldest queued documents past row :after (of one project, or any), with what loading them
-- needs; a document that no longer qualifies for derived rows (expired, redacted since) comes
-- back with indexable 0.
SELECT q.document_row, d.kind, d.byte_length,
       d.state IN ('live', 'superseded') AS indexable
FROM index_queue AS q JOIN documents AS d ON d.id = q.document_row
WHERE q.document_row > :after
  AND (:project IS NULL OR q.project_id = (SELECT id FROM projects WHERE identity = :project))
ORDER BY q.document_row LIMIT :limit;

-- name: still_queued
SELECT 1 FROM index_queue WHERE document_row = ?;

-- name: dequeue
DELETE FROM index_queue WHERE document_row = ?;

-- name: lag
-- How many documents wait and since when (of one project, or all).
SELECT count(*), min(queued_at) FROM index_queue
WHERE :project IS NULL OR project_id = (SELECT id FROM projects WHERE identity = :project);
