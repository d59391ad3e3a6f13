-- Where each epoch of a session began: the message the provider copy started from, and why (a
-- rotation's reason, or `compaction`). `session_epochs` keeps only the current epoch; this keeps
-- them all, so `cwa browse` marks every rotation and compaction where it happened.
CREATE TABLE session_epoch_log (
  session_id  INTEGER NOT NULL REFERENCES sessions (id),
  epoch       INTEGER NOT NULL,
  cut_key     TEXT,                -- first message key of that epoch's provider copy (NULL: the start)
  reason      TEXT,                -- turns | tokens | forced | catch-up | compaction
  started_at  TEXT NOT NULL,
  PRIMARY KEY (session_id, epoch)
);

-- An archive from before knows where its sessions' current epochs began.
INSERT INTO session_epoch_log (session_id, epoch, cut_key, reason, started_at)
SELECT session_id, epoch, cut_key,
       coalesce(json_extract(flags, '$.reason'),
                CASE WHEN json_extract(flags, '$.compactionKey') IS NOT NULL THEN 'compaction' END),
       updated_at
FROM session_epochs WHERE epoch > 1;
