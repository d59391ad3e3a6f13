-- Automatic preflight: the hint ledger (one frozen decision per user message) and the exposure
-- ledger (which sources a hint revealed, for the cooldown). They are separate on purpose: a hint
-- record may be reclaimed while the exposure it caused still suppresses its source.

-- One row per (session, user-message key): the decision made the first time, replayed verbatim.
CREATE TABLE hint_records (
  id                  INTEGER PRIMARY KEY,
  session_id          INTEGER NOT NULL REFERENCES sessions (id),
  message_key         TEXT NOT NULL,
  query_hash          TEXT NOT NULL,     -- blake3 of the message text the decision was made for
  generation          INTEGER,           -- newest index generation when it was decided
  outcome             TEXT NOT NULL CHECK (outcome IN ('historical-snippet', 'continuity-marker',
                          'suppress')),
  reason              TEXT NOT NULL,     -- the continuity policy's reason code
  model_visible_text  TEXT NOT NULL,     -- exactly the bytes inserted after the message ('' = none)
  tokens              INTEGER NOT NULL,  -- estimate of model_visible_text (cwa/tokens.py)
  source_row          INTEGER,           -- the document the hint came from (no FK: retention may
                                         -- remove the document; the record keeps its bytes)
  response            TEXT NOT NULL,     -- JSON: hints and sanitized diagnostics, replayed
  decided_at          TEXT NOT NULL,
  last_active_at      TEXT NOT NULL,     -- last time the key was replayed or counted as active
  UNIQUE (session_id, message_key)
);
CREATE INDEX hint_records_idle ON hint_records (last_active_at);

-- One row per source a hint revealed (a snippet's source, a marker's supporting sources).
CREATE TABLE hint_exposures (
  id              INTEGER PRIMARY KEY,
  session_id      INTEGER NOT NULL REFERENCES sessions (id),  -- where it was revealed
  document_row    INTEGER NOT NULL,                           -- the revealed source (no FK, as above)
  hint_id         INTEGER REFERENCES hint_records (id) ON DELETE SET NULL,
  revealed_at     TEXT NOT NULL,
  cooldown_until  TEXT NOT NULL,
  tombstoned_at   TEXT                                        -- set by maintenance after the cooldown
);
CREATE INDEX hint_exposures_source ON hint_exposures (document_row, cooldown_until);
CREATE INDEX hint_exposures_due ON hint_exposures (cooldown_until) WHERE tombstoned_at IS NULL;
