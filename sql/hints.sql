-- Named queries of automatic preflight's ledgers (cwa/store/hint_ledger.py,
-- cwa/store/exposure_ledger.py). Tables: migrations/0003_hint_ledgers.sql.

-- name: session_row
SELECT s.id FROM sessions AS s JOIN projects AS p ON p.id = s.project_id
WHERE p.identity = ? AND s.session_key = ?;

-- name: find_hint
SELECT model_visible_text, response, last_active_at FROM hint_records
WHERE session_id = ? AND message_key = ?;

-- name: insert_hint
INSERT INTO hint_records (session_id, message_key, query_hash, generation, outcome, reason,
                          model_visible_text, tokens, source_row, response, decided_at,
                          last_active_at)
VALUES (:session, :key, :query_hash, :generation, :outcome, :reason, :text, :tokens, :source,
        :response, :now, :now);

-- name: active_tokens
-- Tokens of the frozen hints of the keys still in the provider context (:keys is a JSON array),
-- found in the session or its ancestors (:sessions): a fork's inherited hints count once.
SELECT coalesce(sum(tokens), 0) FROM (
  SELECT max(tokens) AS tokens FROM hint_records
  WHERE session_id IN (SELECT value FROM json_each(:sessions))
    AND message_key IN (SELECT value FROM json_each(:keys))
  GROUP BY message_key);

-- name: lineage_hint
-- The frozen decision for a key in the nearest session of :sessions (JSON array, session first).
SELECT h.model_visible_text, h.response, h.last_active_at FROM hint_records AS h
JOIN json_each(:sessions) AS s ON s.value = h.session_id
WHERE h.message_key = :key ORDER BY s.key LIMIT 1;

-- name: frozen_keys
-- Which of :keys (JSON array) have a frozen decision in the sessions :sessions (JSON array).
SELECT DISTINCT h.message_key FROM json_each(:sessions) AS s
JOIN hint_records AS h ON h.session_id = s.value
WHERE h.message_key IN (SELECT value FROM json_each(:keys));

-- name: touch_active
-- Keys still in the context count as activity; written at most once a day per record.
UPDATE hint_records SET last_active_at = :now
WHERE session_id = :session AND message_key IN (SELECT value FROM json_each(:keys))
  AND last_active_at < :stale;

-- name: latest_hint
SELECT message_key, response FROM hint_records WHERE session_id = ? ORDER BY id DESC LIMIT 1;

-- name: idle_hints
SELECT id FROM hint_records WHERE last_active_at < ? ORDER BY last_active_at LIMIT ?;

-- name: delete_hint
DELETE FROM hint_records WHERE id = ?;

-- name: surfaced_sources
-- Which of :rows (JSON array of document rows) a hint revealed in one of :sessions (JSON array:
-- the asking session and its ancestors) whose cooldown has not passed.
SELECT DISTINCT document_row FROM hint_exposures
WHERE document_row IN (SELECT value FROM json_each(:rows))
  AND cooldown_until > :now
  AND tombstoned_at IS NULL
  AND session_id IN (SELECT value FROM json_each(:sessions));

-- name: insert_exposure
INSERT INTO hint_exposures (session_id, document_row, hint_id, revealed_at, cooldown_until)
VALUES (?, ?, ?, ?, ?);

-- name: cooled_exposures
SELECT id FROM hint_exposures
WHERE cooldown_until <= ? AND tombstoned_at IS NULL ORDER BY cooldown_until LIMIT ?;

-- name: tombstone_exposure
UPDATE hint_exposures SET tombstoned_at = ? WHERE id = ?;

-- name: old_tombstoned_exposures
SELECT id FROM hint_exposures WHERE tombstoned_at < ? LIMIT ?;

-- name: delete_exposure
DELETE FROM hint_exposures WHERE id = ?;

-- name: source_facts
-- What the continuity policy needs to know about a candidate source: whether the evidence range
-- [:start, :end) overlaps tool output, and the keys of the messages it overlaps (the caller checks
-- them against the keys still visible to the model).
SELECT d.kind, d.retention_class, strftime('%Y-%m-%dT%H:%M:%fZ', d.created_at / 1000.0, 'unixepoch'), d.state,
       d.kind = 'tool-result' OR EXISTS (
         SELECT 1 FROM messages AS m
         WHERE m.document_row = d.id AND m.role IN ('toolResult', 'bashExecution')
           AND m.start_byte < :end AND m.end_byte > :start) AS tool_output,
       (SELECT json_group_array(m.message_key) FROM messages AS m
        WHERE m.document_row = d.id AND m.start_byte < :end AND m.end_byte > :start) AS keys
FROM documents AS d WHERE d.id = :row;

-- name: document_identity
SELECT document_id, version FROM documents WHERE id = ?;

-- name: conversation_ranges
-- A source's user and assistant messages (not tool output): the byte ranges of their text.
SELECT text_start, end_byte FROM messages
WHERE document_row = ? AND role NOT IN ('toolResult', 'bashExecution')
ORDER BY ordinal;
