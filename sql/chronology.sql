-- Named queries of chronology (cwa/retrieve/chronology.py): a session's messages in the order
-- they were written, for gather's neighbours and traverse. Order: document creation time, then
-- document row, then message ordinal. Checkpoint parts are slices of an archived input (its root
-- stands for it), so they are not records of their own.

-- name: record_at
SELECT d.id, d.document_id, d.version, d.kind, d.created_at, d.state, d.session_id, s.session_key,
       p.identity, d.subject_key, m.ordinal, m.message_key, m.role, m.timestamp, m.text_start, m.end_byte
FROM documents AS d
JOIN messages AS m ON m.document_row = d.id
JOIN sessions AS s ON s.id = d.session_id
JOIN projects AS p ON p.id = d.project_id
WHERE d.id = :row AND m.ordinal = :ordinal;

-- name: records_after
SELECT d.id, d.document_id, d.version, d.kind, d.created_at, d.state, d.session_id, s.session_key,
       p.identity, d.subject_key, m.ordinal, m.message_key, m.role, m.timestamp, m.text_start, m.end_byte
FROM documents AS d
JOIN messages AS m ON m.document_row = d.id
JOIN sessions AS s ON s.id = d.session_id
JOIN projects AS p ON p.id = d.project_id
WHERE d.session_id = :session AND d.kind != 'checkpoint-part'
  AND (d.created_at, d.id, m.ordinal) > (:created, :row, :ordinal)
ORDER BY d.created_at, d.id, m.ordinal
LIMIT :limit;

-- name: records_before
SELECT d.id, d.document_id, d.version, d.kind, d.created_at, d.state, d.session_id, s.session_key,
       p.identity, d.subject_key, m.ordinal, m.message_key, m.role, m.timestamp, m.text_start, m.end_byte
FROM documents AS d
JOIN messages AS m ON m.document_row = d.id
JOIN sessions AS s ON s.id = d.session_id
JOIN projects AS p ON p.id = d.project_id
WHERE d.session_id = :session AND d.kind != 'checkpoint-part'
  AND (d.created_at, d.id, m.ordinal) < (:created, :row, :ordinal)
ORDER BY d.created_at DESC, d.id DESC, m.ordinal DESC
LIMIT :limit;

-- name: same_subject
-- Other readable documents of the project under the same subject key (possible conflicts).
SELECT d.document_id, d.version FROM documents AS d
WHERE d.project_id = (SELECT project_id FROM documents WHERE id = :row) AND d.subject_key = :subject
  AND d.id != :row AND d.state IN ('live', 'superseded');

-- name: parent_session
SELECT parent_id FROM sessions WHERE id = ?;
