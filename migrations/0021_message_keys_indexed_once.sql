-- A message key indexed once: the table's UNIQUE (document_row, message_key) and the index on
-- message_key held the same keys twice, about 0.13 × the text on coding sessions. One unique index
-- on (message_key, document_row) enforces the same rule (a key once per document) and answers a
-- lookup by key, as the second index did. Lookups by document go through the primary key.
-- The views that read `messages` go first (a rename checks every view) and come back on open
-- (sql/views.sql).
DROP VIEW IF EXISTS document_messages;
DROP VIEW IF EXISTS session_records;
DELETE FROM meta WHERE key = 'views_digest';
CREATE TABLE messages_new (
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
  PRIMARY KEY (document_row, ordinal)
) WITHOUT ROWID;
INSERT INTO messages_new SELECT document_row, ordinal, message_key, role, tool_name, tool_call_id, timestamp,
                                start_byte, text_start, end_byte FROM messages;
DROP INDEX messages_key;
DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;
CREATE UNIQUE INDEX messages_key ON messages (message_key, document_row);
