-- Index outcomes keyed by document first: (document_row, generation_id, handler). Every lookup
-- names a document (its outcomes in one generation, or all of them when it is purged), so the
-- separate index on document_row, which held a second copy of every row key, is gone: about 0.6
-- bytes per text byte on short chat turns (docs/performance.md). The inspection view over the
-- table goes first (a rename checks every view) and comes back on open (sql/views.sql).
DROP VIEW IF EXISTS index_status;
DELETE FROM meta WHERE key = 'views_digest';
CREATE TABLE index_outcomes_new (
  generation_id  INTEGER NOT NULL REFERENCES index_generations (id),
  document_row   INTEGER NOT NULL REFERENCES documents (id),
  handler        TEXT NOT NULL,
  outcome        TEXT NOT NULL CHECK (outcome IN ('complete', 'partial', 'skipped')),
  detail         TEXT,
  PRIMARY KEY (document_row, generation_id, handler)
) WITHOUT ROWID;
INSERT INTO index_outcomes_new (generation_id, document_row, handler, outcome, detail)
SELECT generation_id, document_row, handler, outcome, detail FROM index_outcomes;
DROP INDEX index_outcomes_document;
DROP TABLE index_outcomes;
ALTER TABLE index_outcomes_new RENAME TO index_outcomes;
