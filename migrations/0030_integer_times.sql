-- A document's times, its messages', its index generation's and its expiry entry's stored as
-- integer epoch milliseconds instead of 24-character ISO-8601 text. Each document carried two or
-- three such times in its row, three more in its time indexes (documents_project_created,
-- documents_session_created, documents_created), two in its generation and two in its expiry entry
-- and that entry's index, and one in each message that has a timestamp: about ten copies of 24
-- bytes a document. An integer of this size takes 6 bytes (on the chat corpus of `cwa eval perf`
-- the archive shrinks by 1.2 × the text: docs/performance.md).
--
-- The views (sql/views.sql) show these times as ISO-8601, as before; statements convert at the
-- boundary (sql/admission.sql says how), so Python still sees the canonical form only. Other
-- tables' times (sessions, leases, protections, ledgers: a row per session or per decision) keep
-- their text.
--
-- A column's type decides how SQLite stores a value (TEXT affinity turns an integer into text),
-- so each time becomes a new INTEGER column under the old name: added, filled, the text column
-- dropped (each drop rewrites the table once). `retention_start`, generated from three of them,
-- goes first and comes back over the new columns. One transaction: a killed process leaves the
-- archive at schema 29 and the next open converts it again from the start.
DROP VIEW IF EXISTS live_documents;
DROP VIEW IF EXISTS document_overview;
DROP VIEW IF EXISTS document_messages;
DROP VIEW IF EXISTS document_texts;
DROP VIEW IF EXISTS session_lineage;
DROP VIEW IF EXISTS index_status;
DROP VIEW IF EXISTS session_records;
DELETE FROM meta WHERE key = 'views_digest';

ALTER TABLE index_generations ADD COLUMN started_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE index_generations ADD COLUMN finished_ms INTEGER;
UPDATE index_generations SET started_ms = round(unixepoch(started_at, 'subsec') * 1000),
                             finished_ms = round(unixepoch(finished_at, 'subsec') * 1000);
ALTER TABLE index_generations DROP COLUMN started_at;
ALTER TABLE index_generations DROP COLUMN finished_at;
ALTER TABLE index_generations RENAME COLUMN started_ms TO started_at;
ALTER TABLE index_generations RENAME COLUMN finished_ms TO finished_at;

-- The due-time index is built again after the conversion (denser pages than updated in place).
DROP INDEX expiry_schedule_due;
ALTER TABLE expiry_schedule ADD COLUMN due_ms INTEGER NOT NULL DEFAULT 0;
UPDATE expiry_schedule SET due_ms = round(unixepoch(due_at, 'subsec') * 1000);
ALTER TABLE expiry_schedule DROP COLUMN due_at;
ALTER TABLE expiry_schedule RENAME COLUMN due_ms TO due_at;
CREATE INDEX expiry_schedule_due ON expiry_schedule (due_at);

DROP INDEX documents_project_created;
DROP INDEX documents_session_created;
DROP INDEX documents_created;
ALTER TABLE documents DROP COLUMN retention_start;
ALTER TABLE documents ADD COLUMN created_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE documents ADD COLUMN admitted_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE documents ADD COLUMN state_changed_ms INTEGER;
ALTER TABLE documents ADD COLUMN shown_until_ms INTEGER;
UPDATE documents SET created_ms = round(unixepoch(created_at, 'subsec') * 1000),
                     admitted_ms = round(unixepoch(admitted_at, 'subsec') * 1000),
                     state_changed_ms = round(unixepoch(state_changed_at, 'subsec') * 1000),
                     shown_until_ms = round(unixepoch(shown_until, 'subsec') * 1000);
ALTER TABLE documents DROP COLUMN created_at;
ALTER TABLE documents DROP COLUMN admitted_at;
ALTER TABLE documents DROP COLUMN state_changed_at;
ALTER TABLE documents DROP COLUMN shown_until;
ALTER TABLE documents RENAME COLUMN created_ms TO created_at;
ALTER TABLE documents RENAME COLUMN admitted_ms TO admitted_at;
ALTER TABLE documents RENAME COLUMN state_changed_ms TO state_changed_at;
ALTER TABLE documents RENAME COLUMN shown_until_ms TO shown_until;
ALTER TABLE documents ADD COLUMN retention_start INTEGER
  GENERATED ALWAYS AS (max(created_at, admitted_at, coalesce(shown_until, created_at))) VIRTUAL;
CREATE INDEX documents_project_created ON documents (project_id, created_at);
CREATE INDEX documents_session_created ON documents (session_id, created_at);
CREATE INDEX documents_created ON documents (created_at);

ALTER TABLE messages ADD COLUMN timestamp_ms INTEGER;
UPDATE messages SET timestamp_ms = round(unixepoch(timestamp, 'subsec') * 1000) WHERE timestamp IS NOT NULL;
ALTER TABLE messages DROP COLUMN timestamp;
ALTER TABLE messages RENAME COLUMN timestamp_ms TO timestamp;
