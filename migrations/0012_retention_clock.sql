-- Retention counts from the latest of a document's creation, its admission and the end of the last
-- context protection that covered it (cwa/store/retention.py): a session engine archives messages
-- under their own, possibly old, timestamps, and what a live window still names must stay readable
-- while it does and for its class's days after it leaves.
ALTER TABLE documents ADD COLUMN shown_until TEXT;  -- when a context protection of it last ended
-- derived, never stored: what every expiry entry counts its days from
ALTER TABLE documents ADD COLUMN retention_start TEXT
  GENERATED ALWAYS AS (max(created_at, admitted_at, coalesce(shown_until, created_at))) VIRTUAL;

-- Entries computed from the creation time alone now count from the retention start.
UPDATE expiry_schedule SET due_at = coalesce(
  (SELECT strftime('%Y-%m-%dT%H:%M:%fZ', d.retention_start, '+' || expiry_schedule.retention_days || ' days')
   FROM documents AS d WHERE d.id = expiry_schedule.document_row),
  '9999-12-31T23:59:59.999Z');
