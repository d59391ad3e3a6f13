-- A document's first and last source keys are read from its messages (ordinals 0 and
-- source_key_count − 1) instead of being stored again in its row: every key was already in
-- `messages` and its index, and a short chat turn's row carried its one key twice more (about
-- 0.45 × the text). `get` and the views answer the same. The views that read the columns go
-- first (a dropped column must not be named by any view) and come back on open (sql/views.sql).
-- ALTER TABLE … DROP COLUMN rewrites each row in place: the freed space is reused by later
-- documents; `cwa maintain --vacuum` gives it back to the file system.
DROP VIEW IF EXISTS live_documents;
DROP VIEW IF EXISTS document_overview;
DELETE FROM meta WHERE key = 'views_digest';
ALTER TABLE documents DROP COLUMN first_source_key;
ALTER TABLE documents DROP COLUMN last_source_key;
