-- Relevance feedback for the importance prior: one row per recall of a locator that a search
-- handed out. The prior's live recall counter is a count over this log, read at query time.
CREATE TABLE recall_feedback (
  id            INTEGER PRIMARY KEY,
  document_row  INTEGER NOT NULL REFERENCES documents (id),
  recalled_at   TEXT NOT NULL,
  lease_id      TEXT            -- the search's lease, when it granted one
);
CREATE INDEX recall_feedback_document ON recall_feedback (document_row);
