-- Retention counts from the latest of a document's creation, its admission and the end of the last
-- context protection that covered it (cwa/store/retention.py): a session engine archives messages
-- under their own, possibly old, timestamps, and what a live window still names must stay readable
-- while it does and for its class's days after it leaves.
ALTER TABLE documents ADD COLUMN shown_until TEXT;  -- when a context protection of it last ended

-- Entries computed from the creation time alone move to the admission time when that is later.
UPDATE expiry_schedule SET due_at = coalesce(
  (SELECT strftime('%Y-%m-%dT%H:%M:%fZ', max(d.created_at, d.admitted_at),
                   '+' || expiry_schedule.retention_days || ' days')
   FROM documents AS d WHERE d.id = expiry_schedule.document_row),
  '9999-12-31T23:59:59.999Z');
