-- Named queries of the session engine's state (cwa/store/session_state.py).
-- Tables: migrations/0008_session_engine.sql.

-- name: find_epoch
SELECT epoch, cut_key, flags FROM session_epochs WHERE session_id = ?;

-- name: save_epoch
INSERT INTO session_epochs (session_id, epoch, cut_key, flags, updated_at)
VALUES (:session, :epoch, :cut, :flags, :now)
ON CONFLICT (session_id) DO UPDATE SET epoch = excluded.epoch, cut_key = excluded.cut_key,
  flags = excluded.flags, updated_at = excluded.updated_at;

-- name: log_epoch
-- Where an epoch began, once (migration 0015): a later save of the same epoch (its flags) keeps it.
INSERT OR IGNORE INTO session_epoch_log (session_id, epoch, cut_key, reason, started_at)
VALUES (:session, :epoch, :cut, :reason, :now);

-- name: lineage_replacements
-- Decisions for :keys (a JSON array) made in the session or its ancestors (:sessions, JSON array
-- in lineage order: the session first); the nearest session's decision comes first.
SELECT r.message_key, r.action, r.document_id, r.text, r.tokens, r.epoch
FROM session_replacements AS r
JOIN json_each(:sessions) AS s ON s.value = r.session_id
WHERE r.message_key IN (SELECT value FROM json_each(:keys))
ORDER BY s.key;

-- name: insert_replacement
INSERT OR IGNORE INTO session_replacements
  (session_id, message_key, action, document_row, document_id, text, tokens, epoch, decided_at)
VALUES (:session, :key, :action, (SELECT id FROM documents
   WHERE (substr(identity_digest, 1, 8) = unhex(substr(:document, 5, 16)) OR named_id = :document)
     AND document_id = :document AND version = :version),
        :document, :text, :tokens, :epoch, :now);

-- name: update_replacement
-- Rotation may rebalance a retained result into a preview (a new epoch: its prefix changes anyway).
UPDATE session_replacements SET action = :action, document_row =
  (SELECT id FROM documents
   WHERE (substr(identity_digest, 1, 8) = unhex(substr(:document, 5, 16)) OR named_id = :document)
     AND document_id = :document AND version = :version),
  document_id = :document, text = :text, tokens = :tokens, epoch = :epoch, decided_at = :now
WHERE session_id = :session AND message_key = :key;

-- name: archived_groups
SELECT group_key, last_key FROM session_turns WHERE session_id IN (SELECT value FROM json_each(?));

-- name: insert_turn
INSERT OR IGNORE INTO session_turns (session_id, group_key, last_key, documents, archived_at)
VALUES (?, ?, ?, ?, ?);

-- name: redact_replacements
-- Redaction: a redacted source's preview leaves the provider copy too.
UPDATE session_replacements SET text = :text, tokens = :tokens
WHERE document_row IN (SELECT value FROM json_each(:rows)) AND text IS NOT NULL;

-- name: document_in_project
-- Whether a document id names a readable document of the project (prior catalog entries are
-- carried over only when they do). Found by id (`+`: not through the project's documents).
SELECT 1 FROM documents AS d JOIN projects AS p ON p.id = +d.project_id
WHERE (substr(d.identity_digest, 1, 8) = unhex(substr(?1, 5, 16)) OR d.named_id = ?1) AND d.document_id = ?1
  AND p.identity = ?2 AND d.state IN ('live', 'superseded') LIMIT 1;

-- name: previous_turn
-- The documents of the latest archive of a group (by its first message key) along the lineage.
SELECT t.documents FROM session_turns AS t
JOIN json_each(:sessions) AS s ON s.value = t.session_id
WHERE t.group_key = :key ORDER BY t.archived_at DESC, t.rowid DESC LIMIT 1;
