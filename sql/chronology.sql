-- Named queries of chronology (cwa/retrieve/chronology.py) over the `session_records` view
-- (sql/views.sql): a session's messages in the order they were written.

-- name: record_at
SELECT document_row, document_id, version, kind, created_at, state, session_row, session_id, project,
       subject_key, ordinal, message_key, role, timestamp, text_start, end_byte FROM session_records
WHERE document_row = :row AND ordinal = :ordinal;

-- name: records_after
SELECT document_row, document_id, version, kind, created_at, state, session_row, session_id, project,
       subject_key, ordinal, message_key, role, timestamp, text_start, end_byte FROM session_records
WHERE session_row = :session
  AND (created_ms, document_row, ordinal) > (round(unixepoch(:created, 'subsec') * 1000), :row, :ordinal)
ORDER BY created_ms, document_row, ordinal
LIMIT :limit;

-- name: records_before
SELECT document_row, document_id, version, kind, created_at, state, session_row, session_id, project,
       subject_key, ordinal, message_key, role, timestamp, text_start, end_byte FROM session_records
WHERE session_row = :session
  AND (created_ms, document_row, ordinal) < (round(unixepoch(:created, 'subsec') * 1000), :row, :ordinal)
ORDER BY created_ms DESC, document_row DESC, ordinal DESC
LIMIT :limit;

-- name: same_subject
-- Other readable documents of the project under the same subject key (possible conflicts).
SELECT d.document_id, d.version FROM documents AS d
WHERE d.project_id = (SELECT project_id FROM documents WHERE id = :row) AND d.subject_key = :subject
  AND d.id != :row AND d.state IN ('live', 'superseded');

-- name: parent_session
SELECT parent_id FROM sessions WHERE id = ?;
