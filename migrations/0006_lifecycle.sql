-- Lifecycle: storage retention, active-context protection, and the purge queue.

-- When each document's storage retention runs out, indexed by due time so maintenance reads only
-- what is due. `retention_days` is the class's setting the entry was computed from: an entry whose
-- days differ from the resolved setting is stale and is recomputed, never acted on. Pinned and
-- durable documents (and classes set to 0 days) have no entry.
CREATE TABLE expiry_schedule (
  document_row    INTEGER PRIMARY KEY REFERENCES documents (id),
  due_at          TEXT NOT NULL,
  retention_days  INTEGER NOT NULL CHECK (retention_days > 0)
);
CREATE INDEX expiry_schedule_due ON expiry_schedule (due_at);

-- The document versions a host's live context depends on, per client, until `expires_at` (the
-- host renews them; a client that went away stops protecting once its rows expire).
CREATE TABLE context_protections (
  client_id     TEXT NOT NULL,
  document_row  INTEGER NOT NULL REFERENCES documents (id),
  expires_at    TEXT NOT NULL,
  PRIMARY KEY (client_id, document_row)
) WITHOUT ROWID;
CREATE INDEX context_protections_document ON context_protections (document_row, expires_at);
CREATE INDEX context_protections_expiry ON context_protections (expires_at);

-- Documents already out of every search mode (expired or redacted) whose bytes and derived rows
-- maintenance still has to remove, in bounded batches.
CREATE TABLE purge_queue (
  document_row  INTEGER PRIMARY KEY REFERENCES documents (id),
  reason        TEXT NOT NULL CHECK (reason IN ('expired', 'redacted')),
  queued_at     TEXT NOT NULL
);

-- Documents admitted before this migration have no expiry entry: the first maintenance pass plans
-- every class in full (cwa/store/retention.py) and then removes this marker.
INSERT INTO meta (key, value) SELECT 'retention_backfill', 'needed' WHERE EXISTS (SELECT 1 FROM documents);
