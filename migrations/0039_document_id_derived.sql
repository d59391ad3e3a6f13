-- cwa: rebuilds documents
-- A document's id derived from its identity digest instead of stored. Admission names a new
-- document `doc-` and the first 20 hex digits of its identity digest (cwa/store/admission.py);
-- the row kept that text (25 bytes) and the UNIQUE index of (document_id, version) kept it again
-- (about 37 bytes): 62 bytes a document, 0.44 × the text of LoCoMo-shaped turns
-- (docs/performance.md). `document_id` is now a generated column, read as before by every
-- statement and view and by SQL on the file; only a document whose id is not its own identity's
-- stores it, in `named_id`: a later version (it keeps the id of the version it replaces) and an
-- orphaned checkpoint part whose identity was released (sql/checkpoints.sql `release_identity`).
-- A statement that finds a document by id looks through the identity's prefix index (migration
-- 0036) or `named_id`'s index (sql/reads.sql `document_version` says how); (named_id, version)
-- stays UNIQUE, and admission, inside its write transaction, gives a new version the next number
-- (sql/admission.sql `latest_version_of`), so an id and version still name one document.
--
-- A UNIQUE constraint and a stored column are part of the table, so the table is made again as
-- 0036 did: the new one made and filled in id order, the old one dropped, the new one renamed
-- (foreign keys off, ids kept: every row that refers to a document still does). The views that
-- read documents go first and come back on open (sql/views.sql). One transaction: a killed
-- process leaves schema 38, and the next open copies again from the start.
DROP VIEW IF EXISTS live_documents;
DROP VIEW IF EXISTS document_overview;
DROP VIEW IF EXISTS document_messages;
DROP VIEW IF EXISTS document_texts;
DROP VIEW IF EXISTS document_digests;
DROP VIEW IF EXISTS session_lineage;
DROP VIEW IF EXISTS index_status;
DROP VIEW IF EXISTS session_records;
DELETE FROM meta WHERE key = 'views_digest';

CREATE TABLE documents_derived_id (
  id                INTEGER PRIMARY KEY,
  document_id       TEXT GENERATED ALWAYS AS
                      (coalesce(named_id, 'doc-' || lower(hex(substr(identity_digest, 1, 10))))) VIRTUAL,
  version           INTEGER NOT NULL CHECK (version >= 1),
  project_id        INTEGER NOT NULL REFERENCES projects (id),
  session_id        INTEGER NOT NULL REFERENCES sessions (id),
  kind              TEXT NOT NULL CHECK (kind IN ('turn', 'tool-result', 'preamble', 'decision',
                        'manual', 'checkpoint-root', 'checkpoint-part', 'summary')),
  retention_class   TEXT NOT NULL CHECK (retention_class IN ('ephemeral', 'conversation',
                        'derived', 'durable')),
  byte_length       INTEGER NOT NULL CHECK (byte_length >= 0),
  text_digest       TEXT NOT NULL,          -- blake3 of the document text (32 bytes; x'' for one chunk: 0037)
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
  named_id          TEXT                    -- the id when it is not derived from identity_digest
);
INSERT INTO documents_derived_id (
  id, named_id, version, project_id, session_id, kind, retention_class, byte_length, text_digest,
  identity_digest, source_key_count, subject_key, supersedes_row, pinned, state, metadata,
  index_generation, created_at, admitted_at, state_changed_at, shown_until)
SELECT
  id, nullif(document_id, 'doc-' || lower(hex(substr(identity_digest, 1, 10)))), version, project_id,
  session_id, kind, retention_class, byte_length, text_digest,
  identity_digest, source_key_count, subject_key, supersedes_row, pinned, state, metadata,
  index_generation, created_at, admitted_at, state_changed_at, shown_until
FROM documents ORDER BY id;
DROP TABLE documents;
ALTER TABLE documents_derived_id RENAME TO documents;

CREATE UNIQUE INDEX documents_named ON documents (named_id, version) WHERE named_id IS NOT NULL;
CREATE INDEX documents_identity_prefix ON documents (substr(identity_digest, 1, 8));
CREATE INDEX documents_supersedes ON documents (supersedes_row) WHERE supersedes_row IS NOT NULL;
CREATE UNIQUE INDEX documents_live_subject ON documents (project_id, subject_key)
  WHERE subject_key IS NOT NULL AND state = 'live';
CREATE INDEX documents_project_created ON documents (project_id, created_at);
CREATE INDEX documents_session_created ON documents (session_id, created_at);
CREATE INDEX documents_created ON documents (created_at);
