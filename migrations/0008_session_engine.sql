-- The session engine's state (cwa/session/engine.py): what it needs to rebuild the same provider
-- copy after a restart, a reload or a fork. Messages themselves stay in the host's transcript.

-- One row per session: the current epoch and where its provider copy starts.
CREATE TABLE session_epochs (
  session_id   INTEGER PRIMARY KEY REFERENCES sessions (id),
  epoch        INTEGER NOT NULL,          -- 1 for the first; +1 at each rotation or compaction reset
  cut_key      TEXT,                      -- key of the first message of the provider copy (NULL: the start)
  flags        TEXT NOT NULL,             -- JSON: rotationQueued, emergency {kept, wanted}, checkpointNeeded
  updated_at   TEXT NOT NULL
);

-- One row per (session, message) the engine decided to show differently, or decided to keep:
-- the decision is made once, when the message first enters an epoch, and replayed after that.
CREATE TABLE session_replacements (
  session_id    INTEGER NOT NULL REFERENCES sessions (id),
  message_key   TEXT NOT NULL,
  action        TEXT NOT NULL CHECK (action IN ('inline', 'preview', 'duplicate', 'oversized')),
  document_row  INTEGER,                  -- the archived source (no FK: retention may remove it)
  document_id   TEXT,
  text          TEXT,                     -- the provider copy's text for the message (NULL: inline)
  tokens        INTEGER NOT NULL,         -- sizing estimate of what the provider sees
  epoch         INTEGER NOT NULL,
  decided_at    TEXT NOT NULL,
  PRIMARY KEY (session_id, message_key)
);

-- One row per archived interaction group: its turn documents, so a group is admitted once.
CREATE TABLE session_turns (
  session_id    INTEGER NOT NULL REFERENCES sessions (id),
  group_key     TEXT NOT NULL,            -- key of the group's first message
  last_key      TEXT NOT NULL,            -- key of its last message when archived
  documents     TEXT NOT NULL,            -- JSON array of document ids, in order
  archived_at   TEXT NOT NULL,
  PRIMARY KEY (session_id, group_key, last_key)
);
