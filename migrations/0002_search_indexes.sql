-- 0002: derived indexes for retrieval (rebuildable from canonical rows with `cwa index rebuild`),
-- search leases, and the supersession log.

-- "Latest …" relations across every project walk documents newest first.
CREATE INDEX documents_created ON documents (created_at);

-- Logical windows: bounded token windows inside a document; messages kept whole where they fit.
CREATE TABLE windows (
  id             INTEGER PRIMARY KEY,  -- also the rowid of window_fts
  document_row   INTEGER NOT NULL REFERENCES documents (id),
  ordinal        INTEGER NOT NULL,
  start_byte     INTEGER NOT NULL,
  end_byte       INTEGER NOT NULL,
  first_message  INTEGER NOT NULL,     -- message ordinals covered
  last_message   INTEGER NOT NULL,
  term_count     INTEGER NOT NULL,
  content_hash   TEXT NOT NULL,        -- blake3 of the window bytes: aliases dedupe on it
  UNIQUE (document_row, ordinal)
);
CREATE INDEX windows_content ON windows (content_hash);

-- BM25F: one column per field; bm25() column weights are the field weights. Contentless: the
-- text lives once, in chunks. Columns hold normalized terms (cwa/index/terms.py), so the FTS5
-- tokenizer only splits on spaces.
CREATE VIRTUAL TABLE window_fts USING fts5 (
  title, user, assistant, body,
  content = '',
  contentless_delete = 1,
  tokenize = "unicode61 remove_diacritics 0 tokenchars '_'"
);
CREATE VIRTUAL TABLE window_vocab USING fts5vocab (window_fts, 'row');

-- Running totals search needs on every query, kept by the handlers so no query counts rows.
CREATE TABLE index_stats (
  name   TEXT PRIMARY KEY,
  value  INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO index_stats (name, value) VALUES ('windows', 0);

-- Exact anchors: paths, symbols, commits, errors, quoted strings, URLs, specific values.
CREATE TABLE anchors (
  document_row   INTEGER NOT NULL REFERENCES documents (id),
  type           TEXT NOT NULL CHECK (type IN ('path', 'symbol', 'commit', 'error', 'quoted',
                     'url', 'value')),
  text           TEXT NOT NULL,        -- case-sensitive
  folded         TEXT,                 -- NFKC + case-folded; NULL when equal to text
  specificity    REAL NOT NULL,
  start_byte     INTEGER NOT NULL,     -- first occurrence in the document
  end_byte       INTEGER NOT NULL,
  occurrences    INTEGER NOT NULL,
  PRIMARY KEY (document_row, type, text)
) WITHOUT ROWID;
CREATE INDEX anchors_text ON anchors (text);
CREATE INDEX anchors_folded ON anchors (folded) WHERE folded IS NOT NULL;

-- Structural cues per message: question, request, correction, answer, decision.
CREATE TABLE message_cues (
  document_row   INTEGER NOT NULL REFERENCES documents (id),
  ordinal        INTEGER NOT NULL,     -- message ordinal
  cue            TEXT NOT NULL CHECK (cue IN ('question', 'request', 'correction', 'answer',
                     'decision')),
  score          REAL NOT NULL,
  PRIMARY KEY (document_row, ordinal, cue)
) WITHOUT ROWID;
CREATE INDEX message_cues_cue ON message_cues (cue, score);

-- Search leases protect the versions a search returned until they expire.
CREATE TABLE leases (
  id           TEXT PRIMARY KEY,
  project_id   INTEGER NOT NULL REFERENCES projects (id),
  created_at   TEXT NOT NULL,
  expires_at   TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX leases_expiry ON leases (expires_at);

CREATE TABLE lease_documents (
  lease_id      TEXT NOT NULL REFERENCES leases (id) ON DELETE CASCADE,
  document_row  INTEGER NOT NULL REFERENCES documents (id),
  PRIMARY KEY (lease_id, document_row)
) WITHOUT ROWID;
CREATE INDEX lease_documents_document ON lease_documents (document_row);

-- Explicit supersession between existing documents (admission's `supersedes` is recorded on the
-- replacement row; `cwa supersede` records here too, so one replacement may retire several).
CREATE TABLE supersessions (
  superseded_row  INTEGER PRIMARY KEY REFERENCES documents (id),
  replacement_row INTEGER NOT NULL REFERENCES documents (id),
  created_at      TEXT NOT NULL
);
CREATE INDEX supersessions_replacement ON supersessions (replacement_row);
