-- cwa: rebuilds documents
-- A document found by the first 8 bytes of its identity digest. `documents` held its 32-byte
-- identity digest UNIQUE, so an automatic index held it again: about 46 bytes a document, 0.32 ×
-- the text of LoCoMo-shaped turns (docs/performance.md), 46 MB at a million documents. An index of the first 8 bytes finds a document as
-- well; admission compares the whole digest (sql/admission.sql `find_by_identity`), inside its
-- write transaction, before it admits one, so an identity is still admitted once (as chunks since
-- migration 0032).
--
-- A UNIQUE constraint is part of the table, so the table is made again, as SQLite describes it:
-- the new one made and filled in id order, the old one dropped, the new one renamed (the first
-- line runs this with foreign keys off, cwa/store/migrations.py; ids are kept, so every row that
-- refers to a document still does, and the rebuilt table's own references are checked before the
-- commit). Columns, constraints and the other indexes are as they were. The views that read
-- documents go first and come back on open (sql/views.sql). One transaction: a killed process
-- leaves schema 35, and the next open copies again from the start.
DROP VIEW IF EXISTS live_documents;
DROP VIEW IF EXISTS document_overview;
DROP VIEW IF EXISTS document_messages;
DROP VIEW IF EXISTS document_texts;
DROP VIEW IF EXISTS session_lineage;
DROP VIEW IF EXISTS index_status;
DROP VIEW IF EXISTS session_records;
DELETE FROM meta WHERE key = 'views_digest';

CREATE TABLE documents_by_prefix (
  id                INTEGER PRIMARY KEY,
  document_id       TEXT NOT NULL,
  version           INTEGER NOT NULL CHECK (version >= 1),
  project_id        INTEGER NOT NULL REFERENCES projects (id),
  session_id        INTEGER NOT NULL REFERENCES sessions (id),
  kind              TEXT NOT NULL CHECK (kind IN ('turn', 'tool-result', 'preamble', 'decision',
                        'manual', 'checkpoint-root', 'checkpoint-part', 'summary')),
  retention_class   TEXT NOT NULL CHECK (retention_class IN ('ephemeral', 'conversation',
                        'derived', 'durable')),
  byte_length       INTEGER NOT NULL CHECK (byte_length >= 0),
  text_digest       TEXT NOT NULL,          -- blake3 of the document text (32 bytes)
  identity_digest   TEXT NOT NULL,          -- blake3 of the canonical manifest (32 bytes): idempotency key
  source_key_count  INTEGER NOT NULL CHECK (source_key_count >= 1),
  subject_key       TEXT,
  supersedes_row    INTEGER REFERENCES documents (id),
  pinned            INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
  state             TEXT NOT NULL DEFAULT 'live'
                        CHECK (state IN ('live', 'superseded', 'tombstoned', 'expired')),
  metadata          TEXT,                   -- JSON object, or NULL
  index_generation  INTEGER REFERENCES index_generations (id),
  created_at        INTEGER NOT NULL DEFAULT 0,
  admitted_at       INTEGER NOT NULL DEFAULT 0,
  state_changed_at  INTEGER,
  shown_until       INTEGER,
  retention_start   INTEGER
    GENERATED ALWAYS AS (max(created_at, admitted_at, coalesce(shown_until, created_at))) VIRTUAL,
  UNIQUE (document_id, version)
);
INSERT INTO documents_by_prefix (
  id, document_id, version, project_id, session_id, kind, retention_class, byte_length, text_digest,
  identity_digest, source_key_count, subject_key, supersedes_row, pinned, state, metadata,
  index_generation, created_at, admitted_at, state_changed_at, shown_until)
SELECT
  id, document_id, version, project_id, session_id, kind, retention_class, byte_length, text_digest,
  identity_digest, source_key_count, subject_key, supersedes_row, pinned, state, metadata,
  index_generation, created_at, admitted_at, state_changed_at, shown_until
FROM documents ORDER BY id;
DROP TABLE documents;
ALTER TABLE documents_by_prefix RENAME TO documents;

CREATE INDEX documents_identity_prefix ON documents (substr(identity_digest, 1, 8));
CREATE INDEX documents_supersedes ON documents (supersedes_row) WHERE supersedes_row IS NOT NULL;
CREATE UNIQUE INDEX documents_live_subject ON documents (project_id, subject_key)
  WHERE subject_key IS NOT NULL AND state = 'live';
CREATE INDEX documents_project_created ON documents (project_id, created_at);
CREATE INDEX documents_session_created ON documents (session_id, created_at);
CREATE INDEX documents_created ON documents (created_at);
