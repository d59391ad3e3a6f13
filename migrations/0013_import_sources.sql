-- What `cwa import` and the client hooks have read of other agents' session stores, so that a
-- re-run reads only what changed since (cwa/store/imports.py).
CREATE TABLE import_sources (
  source TEXT PRIMARY KEY,        -- a transcript file's real path, or "<database>#<session id>"
  host TEXT NOT NULL,             -- claude | codex | opencode | pi
  project TEXT NOT NULL,          -- the project identity the session was archived under
  session_key TEXT NOT NULL,      -- the client's own session id
  fingerprint TEXT NOT NULL,      -- what changes when the source grows (size and mtime, or update time)
  messages INTEGER NOT NULL,      -- messages read
  visible_keys TEXT NOT NULL,     -- JSON list: keys of the messages since the latest compaction
  imported_at TEXT NOT NULL
);
CREATE INDEX import_sources_by_session ON import_sources (project, session_key);
