-- 0001: the canonical store. Everything here is written once at admission and never edited,
-- except a document's state/pin columns and a session's first recorded parent.

CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value BLOB NOT NULL
) WITHOUT ROWID;

-- The locator secret signs recall locators; it is created once and never leaves the file.
INSERT INTO meta (key, value) VALUES ('locator_secret', randomblob(32));
INSERT INTO meta (key, value) VALUES ('archive_id', lower(hex(randomblob(16))));
INSERT INTO meta (key, value) VALUES ('created_at', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));

CREATE TABLE projects (
  id          INTEGER PRIMARY KEY,
  identity    TEXT NOT NULL UNIQUE,  -- opaque; the CLI uses the canonical real path of the cwd
  created_at  TEXT NOT NULL
);

CREATE TABLE sessions (
  id           INTEGER PRIMARY KEY,
  project_id   INTEGER NOT NULL REFERENCES projects (id),
  session_key  TEXT NOT NULL,                       -- the host's session id
  parent_id    INTEGER REFERENCES sessions (id),    -- recorded lineage (fork, clone, new from parent)
  created_at   TEXT NOT NULL,
  UNIQUE (project_id, session_key)
);
CREATE INDEX sessions_parent ON sessions (parent_id);

CREATE TABLE index_generations (
  id           INTEGER PRIMARY KEY,
  reason       TEXT NOT NULL CHECK (reason IN ('admit', 'rebuild')),
  started_at   TEXT NOT NULL,
  finished_at  TEXT
);

CREATE TABLE documents (
  id                INTEGER PRIMARY KEY,
  document_id       TEXT NOT NULL,
  version           INTEGER NOT NULL CHECK (version >= 1),
  project_id        INTEGER NOT NULL REFERENCES projects (id),
  session_id        INTEGER NOT NULL REFERENCES sessions (id),
  kind              TEXT NOT NULL CHECK (kind IN ('turn', 'tool-result', 'preamble', 'decision',
                        'manual', 'checkpoint-root', 'checkpoint-part', 'summary')),
  retention_class   TEXT NOT NULL CHECK (retention_class IN ('ephemeral', 'conversation',
                        'derived', 'durable')),
  created_at        TEXT NOT NULL,  -- canonical UTC ISO-8601, sorts as text
  admitted_at       TEXT NOT NULL,
  byte_length       INTEGER NOT NULL CHECK (byte_length >= 0),
  text_digest       TEXT NOT NULL,          -- blake3 (hex) of the document text
  identity_digest   TEXT NOT NULL UNIQUE,   -- blake3 (hex) of the canonical manifest: idempotency key
  source_key_count  INTEGER NOT NULL CHECK (source_key_count >= 1),
  first_source_key  TEXT NOT NULL,
  last_source_key   TEXT NOT NULL,
  subject_key       TEXT,
  supersedes_row    INTEGER REFERENCES documents (id),
  pinned            INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
  state             TEXT NOT NULL DEFAULT 'live'
                        CHECK (state IN ('live', 'superseded', 'tombstoned', 'expired')),
  state_changed_at  TEXT,
  metadata          TEXT,                   -- JSON object, or NULL
  index_generation  INTEGER REFERENCES index_generations (id),
  UNIQUE (document_id, version)
);
CREATE INDEX documents_project_created ON documents (project_id, created_at);
CREATE INDEX documents_session_created ON documents (session_id, created_at);
CREATE INDEX documents_supersedes ON documents (supersedes_row) WHERE supersedes_row IS NOT NULL;
-- At most one live document per subject key in a project.
CREATE UNIQUE INDEX documents_live_subject ON documents (project_id, subject_key)
  WHERE subject_key IS NOT NULL AND state = 'live';

-- Content-addressed pieces of document text: identical bytes are stored once.
CREATE TABLE chunks (
  id           INTEGER PRIMARY KEY,
  hash         TEXT NOT NULL UNIQUE,  -- blake3 (hex) of data
  byte_length  INTEGER NOT NULL,
  data         BLOB NOT NULL          -- last, so reading hash/length never loads the payload
);

CREATE TABLE document_chunks (
  document_row  INTEGER NOT NULL REFERENCES documents (id),
  ordinal       INTEGER NOT NULL,
  chunk_id      INTEGER NOT NULL REFERENCES chunks (id),
  start_byte    INTEGER NOT NULL,
  end_byte      INTEGER NOT NULL,
  PRIMARY KEY (document_row, ordinal)
) WITHOUT ROWID;
CREATE INDEX document_chunks_chunk ON document_chunks (chunk_id);

CREATE TABLE messages (
  document_row  INTEGER NOT NULL REFERENCES documents (id),
  ordinal       INTEGER NOT NULL,
  message_key   TEXT NOT NULL,
  role          TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'toolResult', 'bashExecution',
                    'compactionSummary', 'branchSummary', 'custom')),
  tool_name     TEXT,
  tool_call_id  TEXT,
  timestamp     TEXT,
  start_byte    INTEGER NOT NULL,  -- start of the message's header line
  text_start    INTEGER NOT NULL,  -- start of the message text
  end_byte      INTEGER NOT NULL,  -- end of the message text
  PRIMARY KEY (document_row, ordinal),
  UNIQUE (document_row, message_key)
) WITHOUT ROWID;
CREATE INDEX messages_key ON messages (message_key);

CREATE TABLE index_outcomes (
  generation_id  INTEGER NOT NULL REFERENCES index_generations (id),
  document_row   INTEGER NOT NULL REFERENCES documents (id),
  handler        TEXT NOT NULL,
  outcome        TEXT NOT NULL CHECK (outcome IN ('complete', 'partial', 'skipped')),
  detail         TEXT,
  PRIMARY KEY (generation_id, document_row, handler)
) WITHOUT ROWID;
CREATE INDEX index_outcomes_document ON index_outcomes (document_row);
