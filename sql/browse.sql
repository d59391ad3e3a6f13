-- Canned queries of `cwa browse` (cwa/browse.py): what people look for in their archive.
-- Each is a read-only SELECT that Datasette runs with the named parameters in its form.

-- name: sessions_by_date
-- Sessions, newest first: project, parent, documents, archived bytes and their token estimate.
SELECT s.session_key AS session, p.identity AS project, parent.session_key AS parent_session,
       strftime('%Y-%m-%dT%H:%M:%fZ', min(d.created_at) / 1000.0, 'unixepoch') AS first_document,
       strftime('%Y-%m-%dT%H:%M:%fZ', max(d.created_at) / 1000.0, 'unixepoch') AS last_document,
       count(d.id) AS documents, sum(d.byte_length) AS bytes, sum(d.byte_length) / 4 AS tokens_estimate
FROM sessions AS s
JOIN projects AS p ON p.id = s.project_id
LEFT JOIN sessions AS parent ON parent.id = s.parent_id
LEFT JOIN documents AS d ON d.session_id = s.id AND d.state IN ('live', 'superseded')
GROUP BY s.id
ORDER BY last_document DESC NULLS LAST;

-- name: session_turns
-- One session's archived messages in the order they were written, with the command that prints
-- a document's exact text (recall and locators stay cwa's own logic).
SELECT r.created_at, r.document_id, r.version, r.kind, r.role, r.ordinal, r.state,
       (SELECT CAST(substr(CAST(t.text AS BLOB), r.text_start + 1, min(r.end_byte - r.text_start, 2000)) AS TEXT)
          FROM document_texts AS t WHERE t.document_row = r.document_row) AS text,
       'cwa get ' || r.document_id || ' --version ' || r.version || ' --text' AS exact_text_command
FROM session_records AS r
WHERE r.session_id = :session
ORDER BY r.created_ms, r.document_row, r.ordinal;

-- name: hints_shown
-- What preflight decided for each user message (what `cwa why` says): outcome, reason, the exact
-- bytes inserted (empty when nothing was shown), their token estimate.
SELECT h.decided_at, s.session_key AS session, h.message_key, h.outcome, h.reason, h.tokens,
       h.model_visible_text AS inserted_text,
       'cwa why --project ''' || p.identity || ''' --session ' || s.session_key || ' --message-key '
         || h.message_key AS why_command
FROM hint_records AS h JOIN sessions AS s ON s.id = h.session_id JOIN projects AS p ON p.id = s.project_id
WHERE :session = '' OR s.session_key = :session
ORDER BY h.decided_at DESC;

-- name: rotated_and_externalized
-- What the session engine took out of the model's view in a session: previews of archived tool
-- output, duplicate markers, oversized inputs (each names the archived document), and the epochs.
SELECT s.session_key AS session, r.epoch, r.message_key, r.action, r.document_id, r.tokens, r.decided_at
FROM session_replacements AS r JOIN sessions AS s ON s.id = r.session_id
WHERE r.action != 'inline' AND (:session = '' OR s.session_key = :session)
ORDER BY r.decided_at;

-- name: documents_due_to_expire
-- Storage retention: the documents that expire next (pinned ones have no entry).
SELECT strftime('%Y-%m-%dT%H:%M:%fZ', e.due_at / 1000.0, 'unixepoch') AS due_at, d.document_id, d.version, d.kind, d.retention_class, d.byte_length, p.identity AS project,
       s.session_key AS session
FROM expiry_schedule AS e
JOIN documents AS d ON d.id = e.document_row
JOIN projects AS p ON p.id = d.project_id
JOIN sessions AS s ON s.id = d.session_id
ORDER BY e.due_at
LIMIT 500;

-- name: bytes_by_kind
SELECT kind, state, count(*) AS documents, sum(byte_length) AS bytes
FROM documents GROUP BY kind, state ORDER BY bytes DESC;

-- The pages of cwa's own plugin (cwa/integrations/datasette/cwa_pages.py) read these.

-- name: page_sessions
-- Sessions of a project (empty: every project), newest first: parent, span, documents, bytes,
-- the epoch reached (rotations + 1), what the engine took out of view, hints shown.
SELECT s.session_key AS session, p.identity AS project, parent.session_key AS parent_session,
       strftime('%Y-%m-%dT%H:%M:%fZ', min(d.created_at) / 1000.0, 'unixepoch') AS first_at, strftime('%Y-%m-%dT%H:%M:%fZ', max(d.created_at) / 1000.0, 'unixepoch') AS last_at,
       count(d.id) AS documents,
       coalesce(sum(d.byte_length), 0) AS bytes,
       (SELECT e.epoch FROM session_epochs AS e WHERE e.session_id = s.id) AS epoch,
       (SELECT count(*) FROM session_replacements AS r WHERE r.session_id = s.id AND r.action != 'inline')
         AS replaced,
       (SELECT count(*) FROM hint_records AS h WHERE h.session_id = s.id AND h.outcome != 'suppress') AS hints
FROM sessions AS s
JOIN projects AS p ON p.id = s.project_id
LEFT JOIN sessions AS parent ON parent.id = s.parent_id
LEFT JOIN documents AS d ON d.session_id = s.id AND d.state IN ('live', 'superseded')
WHERE :project = '' OR p.identity = :project
GROUP BY s.id
ORDER BY last_at DESC NULLS LAST
LIMIT 500;

-- name: page_session_records
-- One session's archived messages in order, each with its document's size and the engine's
-- decision for it (epoch, and what the provider saw instead: a preview, a duplicate marker, an
-- oversized input archived), and where its text lies (the page reads its first bytes only).
SELECT r.created_at, r.document_id, r.version, r.kind, r.role, r.message_key, r.state,
       d.byte_length, r.document_row, r.text_start, r.end_byte,
       x.action, x.epoch, x.document_id AS archived_as, x.tokens, a.byte_length AS archived_bytes
FROM session_records AS r
JOIN documents AS d ON d.id = r.document_row
LEFT JOIN session_replacements AS x ON x.session_id = r.session_row AND x.message_key = r.message_key
LEFT JOIN documents AS a ON a.id = x.document_row
WHERE r.project = :project AND r.session_id = :session
ORDER BY r.created_ms, r.document_row, r.ordinal
LIMIT 2000;

-- name: page_hints
-- One session's preflight decisions, newest first, with where the user message they were made for
-- lies (when it is archived) and the document the hint quoted.
SELECT h.decided_at, h.message_key, h.outcome, h.reason, h.tokens, h.model_visible_text AS inserted_text,
       src.document_id AS source_document, src.version AS source_version,
       um.document_row, um.text_start, um.end_byte
FROM hint_records AS h
JOIN sessions AS s ON s.id = h.session_id
JOIN projects AS p ON p.id = s.project_id
LEFT JOIN documents AS src ON src.id = h.source_row
LEFT JOIN messages AS um ON (um.document_row, um.ordinal) = (
  SELECT m.document_row, m.ordinal FROM messages AS m JOIN documents AS md ON md.id = m.document_row
  WHERE md.session_id = s.id AND m.message_key = h.message_key LIMIT 1)
WHERE p.identity = :project AND s.session_key = :session
ORDER BY h.decided_at DESC
LIMIT 500;

-- name: page_growth
-- Documents and bytes archived per day (admission time), the last :days days.
SELECT strftime('%Y-%m-%d', admitted_at / 1000, 'unixepoch') AS day, count(*) AS documents, sum(byte_length) AS bytes
FROM documents
GROUP BY day
ORDER BY day DESC
LIMIT :days;

-- name: page_due
-- Retention: documents due to expire within :seconds of now, and the next due time.
SELECT count(*) FILTER (WHERE due_at <= round(unixepoch(:soon, 'subsec') * 1000)), strftime('%Y-%m-%dT%H:%M:%fZ', min(due_at) / 1000.0, 'unixepoch')
FROM expiry_schedule;

-- name: page_session_epoch
-- Where a session's current provider copy starts (NULL: its first message) and its epoch.
SELECT e.epoch, e.cut_key FROM session_epochs AS e
JOIN sessions AS s ON s.id = e.session_id JOIN projects AS p ON p.id = s.project_id
WHERE p.identity = :project AND s.session_key = :session;

-- name: page_session_rotations
-- Where each epoch after the first began, and why (migration 0015's log).
SELECT l.epoch, l.cut_key, l.reason, l.started_at FROM session_epoch_log AS l
JOIN sessions AS s ON s.id = l.session_id JOIN projects AS p ON p.id = s.project_id
WHERE p.identity = :project AND s.session_key = :session
ORDER BY l.epoch;
