-- Canned queries of `cwa browse` (cwa/browse.py): what people look for in their archive.
-- Each is a read-only SELECT that Datasette runs with the named parameters in its form.

-- name: sessions_by_date
-- Sessions, newest first: project, parent, documents, archived bytes and their token estimate.
SELECT s.session_key AS session, p.identity AS project, parent.session_key AS parent_session,
       min(d.created_at) AS first_document, max(d.created_at) AS last_document,
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
          FROM document_texts AS t WHERE t.document_id = r.document_id AND t.version = r.version) AS text,
       'cwa get ' || r.document_id || ' --version ' || r.version || ' --text' AS exact_text_command
FROM session_records AS r
WHERE r.session_id = :session
ORDER BY r.created_at, r.document_row, r.ordinal;

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
SELECT e.due_at, d.document_id, d.version, d.kind, d.retention_class, d.byte_length, p.identity AS project,
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
