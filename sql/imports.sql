-- Named queries of what imports and client hooks have read (cwa/store/imports.py).

-- name: fingerprint
SELECT fingerprint FROM import_sources WHERE source = ?;

-- name: record
INSERT INTO import_sources
  (source, host, project, session_key, fingerprint, messages, visible_keys, imported_at)
VALUES (:source, :host, :project, :session_key, :fingerprint, :messages, :visible_keys, :now)
ON CONFLICT (source) DO UPDATE SET
  host = excluded.host, project = excluded.project, session_key = excluded.session_key,
  fingerprint = excluded.fingerprint, messages = excluded.messages,
  visible_keys = excluded.visible_keys, imported_at = excluded.imported_at;

-- name: visible_keys
-- The keys still in the client's live context for a session: every source read for it (the
-- main transcript; its subagents have sessions of their own).
SELECT visible_keys FROM import_sources WHERE project = ? AND session_key = ? ORDER BY imported_at DESC LIMIT 1;
