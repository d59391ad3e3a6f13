-- Index outcomes named by small integers: each document gets one row per handler per generation,
-- and each row spelled out its handler ('structural') and outcome ('complete'): about 0.9 × the
-- text of a short chat turn. Handlers are now ids into `index_handlers` (a name is added the
-- first time a handler records an outcome) and outcomes codes into `index_outcome_kinds`; the
-- rows, their key and what they record are the same. The `index_status` view shows the names, as
-- before; it goes first (a rename checks every view) and comes back on open (sql/views.sql).
DROP VIEW IF EXISTS index_status;
DELETE FROM meta WHERE key = 'views_digest';

CREATE TABLE index_handlers (
  id    INTEGER PRIMARY KEY,
  name  TEXT NOT NULL UNIQUE
);
INSERT INTO index_handlers (id, name) VALUES (1, 'exact'), (2, 'lexical'), (3, 'semantic'), (4, 'structural');
INSERT OR IGNORE INTO index_handlers (name) SELECT DISTINCT handler FROM index_outcomes ORDER BY handler;

CREATE TABLE index_outcome_kinds (
  code  INTEGER PRIMARY KEY,
  name  TEXT NOT NULL UNIQUE
);
INSERT INTO index_outcome_kinds (code, name) VALUES (0, 'complete'), (1, 'partial'), (2, 'skipped');

CREATE TABLE index_outcomes_new (
  document_row   INTEGER NOT NULL REFERENCES documents (id),
  generation_id  INTEGER NOT NULL REFERENCES index_generations (id),
  handler_id     INTEGER NOT NULL REFERENCES index_handlers (id),
  outcome        INTEGER NOT NULL REFERENCES index_outcome_kinds (code),
  detail         TEXT,
  PRIMARY KEY (document_row, generation_id, handler_id)
) WITHOUT ROWID;
INSERT INTO index_outcomes_new (document_row, generation_id, handler_id, outcome, detail)
SELECT o.document_row, o.generation_id, h.id, k.code, o.detail
FROM index_outcomes AS o
JOIN index_handlers AS h ON h.name = o.handler
JOIN index_outcome_kinds AS k ON k.name = o.outcome;
DROP TABLE index_outcomes;
ALTER TABLE index_outcomes_new RENAME TO index_outcomes;
