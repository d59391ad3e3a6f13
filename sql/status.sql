-- Named queries used by `status` (cwa/store/status.py). ?1 is a project identity or NULL for all.

-- name: documents_by_state
SELECT d.state, count(*), coalesce(sum(d.byte_length), 0)
FROM documents AS d JOIN projects AS p ON p.id = d.project_id
WHERE ?1 IS NULL OR p.identity = ?1
GROUP BY d.state ORDER BY d.state;

-- name: documents_by_kind
SELECT d.kind, count(*)
FROM documents AS d JOIN projects AS p ON p.id = d.project_id
WHERE ?1 IS NULL OR p.identity = ?1
GROUP BY d.kind ORDER BY d.kind;

-- name: documents_by_class
SELECT d.retention_class, count(*)
FROM documents AS d JOIN projects AS p ON p.id = d.project_id
WHERE ?1 IS NULL OR p.identity = ?1
GROUP BY d.retention_class ORDER BY d.retention_class;

-- name: counts
SELECT
  (SELECT count(*) FROM projects WHERE ?1 IS NULL OR identity = ?1),
  (SELECT count(*) FROM sessions AS s JOIN projects AS p ON p.id = s.project_id
     WHERE ?1 IS NULL OR p.identity = ?1),
  (SELECT count(*) FROM messages AS m JOIN documents AS d ON d.id = m.document_row
     JOIN projects AS p ON p.id = d.project_id WHERE ?1 IS NULL OR p.identity = ?1);

-- name: chunk_totals
SELECT count(*), coalesce(sum(byte_length), 0) FROM chunks;

-- name: latest_generation
SELECT max(id) FROM index_generations;

-- name: meta_value
SELECT value FROM meta WHERE key = ?;

-- name: documents_by_class_and_state
-- Logical documents and bytes per retention class and state (`cwa status --archive`).
SELECT retention_class, state, count(*), coalesce(sum(byte_length), 0)
FROM documents GROUP BY retention_class, state ORDER BY retention_class, state;

-- name: table_bytes
-- Bytes of pages per table (dbstat), an index's counted with its table's, for the shares of the file.
SELECT coalesce(s.tbl_name, d.name), sum(d.pgsize)
FROM dbstat AS d LEFT JOIN sqlite_schema AS s ON s.name = d.name
GROUP BY 1;

-- name: lifecycle_counts
SELECT
  (SELECT count(*) FROM documents WHERE pinned = 1),
  (SELECT count(*) FROM leases WHERE expires_at > :now),
  (SELECT count(DISTINCT document_row) FROM lease_documents AS ld JOIN leases AS l ON l.id = ld.lease_id
     WHERE l.expires_at > :now),
  (SELECT count(*) FROM context_protections WHERE expires_at > :now),
  (SELECT count(*) FROM expiry_schedule WHERE due_at <= round(unixepoch(:now, 'subsec') * 1000)),
  (SELECT strftime('%Y-%m-%dT%H:%M:%fZ', min(due_at) / 1000.0, 'unixepoch') FROM expiry_schedule WHERE due_at > round(unixepoch(:now, 'subsec') * 1000)),
  (SELECT count(*) FROM purge_queue);

-- name: live_logical_bytes
SELECT coalesce(sum(byte_length), 0) FROM documents WHERE state IN ('live', 'superseded');

-- name: projects_held
-- The projects holding live documents, most first (for a person choosing --project).
SELECT p.identity, count(*) FROM documents AS d JOIN projects AS p ON p.id = d.project_id
WHERE d.state = 'live' GROUP BY p.id ORDER BY count(*) DESC, p.identity LIMIT 20;
