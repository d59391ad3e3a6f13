-- Index outcomes stored as exceptions. Every handler of every generation wrote a row per
-- document, and nearly all of them said `complete` with no detail: four rows a document, about
-- 0.45 × the text of a short chat turn. A generation now keeps the set of handlers it ran, as
-- bits (`1 << index_handlers.id`), and a document has a row only for an outcome other than a
-- plain `complete` (`partial`, `skipped`, or one with a detail). A handler in its generation's
-- set without a row completed; the `index_status` view and `get` show every handler, as before.
-- The view goes first (it is re-created on open from sql/views.sql).
DROP VIEW IF EXISTS index_status;
DELETE FROM meta WHERE key = 'views_digest';

ALTER TABLE index_generations ADD COLUMN handlers INTEGER NOT NULL DEFAULT 0;

-- Every document of a generation ran the same handlers, each of which wrote a row; distinct
-- powers of two sum to their OR.
UPDATE index_generations SET handlers = ran.bits
FROM (SELECT generation_id, sum(DISTINCT 1 << handler_id) AS bits
      FROM index_outcomes GROUP BY generation_id) AS ran
WHERE ran.generation_id = index_generations.id;

DELETE FROM index_outcomes WHERE outcome = 0 AND detail IS NULL;
