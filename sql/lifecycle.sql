-- Lifecycle queries: retention schedule, protections, expiry, redaction and purge
-- (cwa/store/retention.py, protection.py, redaction.py, purge.py).

-- name: schedule_document
-- One document's expiry, :days (> 0) after its `retention_start` (a generated column: the latest
-- of its creation, its admission and the end of the last context protection that covered it).
-- Times are epoch milliseconds (migration 0030); a due date saturates at 9999-12-31T23:59:59.999Z
-- (253402300799999), the last instant the views can show.
INSERT OR REPLACE INTO expiry_schedule (document_row, due_at, retention_days)
SELECT d.id, min(d.retention_start + :days * 86400000, 253402300799999), :days
FROM documents AS d
WHERE d.id = :row AND d.pinned = 0 AND d.state IN ('live', 'superseded');

-- name: unschedule_document
DELETE FROM expiry_schedule WHERE document_row = ?;

-- name: clear_class_schedule
-- Every entry of one class (before re-planning it with other days, or none).
DELETE FROM expiry_schedule
WHERE document_row IN (SELECT id FROM documents WHERE retention_class = :class);

-- name: plan_class
-- Schedule every live or superseded, unpinned document of one class (from its retention start;
-- due dates saturate as above).
INSERT OR REPLACE INTO expiry_schedule (document_row, due_at, retention_days)
SELECT d.id, min(d.retention_start + :days * 86400000, 253402300799999), :days
FROM documents AS d
WHERE d.retention_class = :class AND d.pinned = 0 AND d.state IN ('live', 'superseded');

-- name: due_entries
SELECT s.document_row, strftime('%Y-%m-%dT%H:%M:%fZ', s.due_at / 1000.0, 'unixepoch'), s.retention_days, d.retention_class, d.state, d.pinned
FROM expiry_schedule AS s JOIN documents AS d ON d.id = s.document_row
WHERE s.due_at <= round(unixepoch(:now, 'subsec') * 1000)
ORDER BY s.due_at, s.document_row
LIMIT :limit;

-- name: due_at
SELECT strftime('%Y-%m-%dT%H:%M:%fZ', due_at / 1000.0, 'unixepoch') FROM expiry_schedule WHERE document_row = :row;

-- name: due_count
SELECT count(*) FROM expiry_schedule WHERE due_at <= round(unixepoch(:now, 'subsec') * 1000);

-- name: protected_until
-- The latest expiry among the active leases and context protections of one document (NULL: none),
-- and the latest end of a context protection that has lapsed but not been cleaned up yet.
SELECT (SELECT max(until) FROM (
          SELECT l.expires_at AS until FROM lease_documents AS ld JOIN leases AS l ON l.id = ld.lease_id
          WHERE ld.document_row = :row AND l.expires_at > :now
          UNION ALL
          SELECT expires_at FROM context_protections WHERE document_row = :row AND expires_at > :now)),
       (SELECT max(expires_at) FROM context_protections WHERE document_row = :row AND expires_at <= :now);

-- name: postpone
UPDATE expiry_schedule SET due_at = round(unixepoch(:until, 'subsec') * 1000) WHERE document_row = :row;

-- name: set_state
UPDATE documents SET state = :state, state_changed_at = round(unixepoch(:now, 'subsec') * 1000) WHERE id = :row;

-- name: queue_purge
-- A redaction outranks an expiry already queued (it also forgets the metadata).
INSERT INTO purge_queue (document_row, reason, queued_at) VALUES (?, ?, ?)
ON CONFLICT (document_row) DO UPDATE SET reason = 'redacted' WHERE excluded.reason = 'redacted';

-- name: set_pinned
UPDATE documents SET pinned = :pinned WHERE id = :row;

-- name: protect
INSERT INTO context_protections (client_id, document_row, expires_at) VALUES (?, ?, ?)
ON CONFLICT (client_id, document_row) DO UPDATE SET expires_at = excluded.expires_at;

-- name: client_protections
SELECT document_row, expires_at FROM context_protections WHERE client_id = ?;

-- name: drop_client_protection
DELETE FROM context_protections WHERE client_id = ? AND document_row = ?;

-- name: lapsed_protections
SELECT client_id, document_row, expires_at FROM context_protections WHERE expires_at <= :now
ORDER BY expires_at LIMIT :limit;

-- name: mark_shown_until
-- A context protection of the document ended at :until: its retention counts from then on.
UPDATE documents SET shown_until = round(unixepoch(:until, 'subsec') * 1000)
WHERE id = :row AND (shown_until IS NULL OR shown_until < round(unixepoch(:until, 'subsec') * 1000));

-- name: reschedule_document
-- The document's current entry again from its retention start (same days; none: nothing to do).
UPDATE expiry_schedule SET due_at = coalesce(
  (SELECT min(d.retention_start + expiry_schedule.retention_days * 86400000, 253402300799999)
   FROM documents AS d WHERE d.id = expiry_schedule.document_row),
  253402300799999)
WHERE document_row = :row;

-- name: named_documents
-- The readable versions of the document ids a live context names (:ids, a JSON array) within one
-- project, and the parts of every checkpoint root among them (a root reads its text from them).
WITH named AS (
  SELECT d.id FROM json_each(:ids) AS i
  JOIN documents AS d ON (substr(d.identity_digest, 1, 8) = unhex(substr(i.value, 5, 16)) OR d.named_id = i.value)
    AND d.document_id = i.value
  JOIN projects AS p ON p.id = +d.project_id  -- `+`: found by id, not through the project's
  WHERE p.identity = :project
    AND d.state IN ('live', 'superseded'))
SELECT id FROM named
UNION
SELECT c.part_row FROM checkpoint_parts AS c WHERE c.root_row IN (SELECT id FROM named);

-- name: expired_leases
DELETE FROM leases WHERE id IN (SELECT id FROM leases WHERE expires_at <= :now LIMIT :limit);

-- name: scope_documents
-- Every document (any state but already redacted) of a project, or of one session of it.
SELECT d.id FROM documents AS d
JOIN projects AS p ON p.id = d.project_id
JOIN sessions AS s ON s.id = d.session_id
WHERE p.identity = :project AND (:session IS NULL OR s.session_key = :session)
  AND d.state <> 'tombstoned'
ORDER BY d.id;

-- name: blank_hints_from
-- Frozen hints whose bytes came from redacted documents replay as nothing from now on.
UPDATE hint_records
SET model_visible_text = '', tokens = 0, outcome = 'suppress', reason = 'source-redacted',
    response = :response, source_row = NULL
WHERE source_row IN (SELECT value FROM json_each(:rows));

-- name: drop_protections_of
DELETE FROM context_protections WHERE document_row IN (SELECT value FROM json_each(:rows));

-- name: drop_lease_documents_of
DELETE FROM lease_documents WHERE document_row IN (SELECT value FROM json_each(:rows));

-- name: next_purges
SELECT document_row, reason FROM purge_queue ORDER BY queued_at, document_row LIMIT :limit;

-- name: purge_count
SELECT count(*) FROM purge_queue;

-- name: windows_of
SELECT id, content_hash FROM windows WHERE document_row = ?;

-- name: delete_window_fts_row
DELETE FROM window_fts WHERE rowid = ?;

-- name: delete_windows_of
DELETE FROM windows WHERE document_row = ?;

-- name: delete_anchors_of
-- A document's anchors, then the dictionary's texts no other document's anchor names (a purged
-- document's paths and quoted strings leave the file with it).
DELETE FROM anchors WHERE document_row = ? RETURNING packed;

-- name: delete_anchor_postings_of
DELETE FROM anchor_postings WHERE rowid = ?;

-- name: delete_unused_anchor_texts
-- After the document's postings are gone: its texts no other document's postings name.
DELETE FROM anchor_texts WHERE id IN (SELECT value FROM json_each(:ids))
  AND NOT EXISTS (SELECT 1 FROM anchor_postings AS p WHERE p.anchor_postings MATCH ('a' || anchor_texts.id));

-- name: delete_cues_of
DELETE FROM message_cues WHERE document_row = ?;

-- name: delete_outcomes_of
DELETE FROM index_outcomes WHERE document_row = ?;

-- name: chunks_of
SELECT DISTINCT chunk_id FROM document_chunks WHERE document_row = ?;

-- name: keep_text_digest
-- A one-chunk document's digest is its chunk's hash (sql/views.sql `document_digests`): stored in
-- the document before its chunks go, so the header that stays still names it.
UPDATE documents SET text_digest = (SELECT text_digest FROM document_digests WHERE document_row = ?1)
WHERE id = ?1 AND text_digest = x'';

-- name: delete_document_chunks_of
DELETE FROM document_chunks WHERE document_row = ?;

-- name: delete_chunk_if_unreferenced
DELETE FROM chunks WHERE id = ? AND NOT EXISTS (SELECT 1 FROM document_chunks WHERE chunk_id = ?);

-- name: embedding_if_unreferenced
-- A content's vectors and windows are sought by the digest's first 8 bytes, then compared whole
-- (sql/semantic.sql; tests/test_schema.py checks each such plan).
SELECT e.id FROM window_embeddings AS e
WHERE substr(e.content_hash, 1, 8) = substr(:hash, 1, 8) AND e.content_hash = :hash AND NOT EXISTS (
  SELECT 1 FROM windows WHERE substr(content_hash, 1, 8) = substr(e.content_hash, 1, 8) AND content_hash = e.content_hash);

-- name: delete_embedding
DELETE FROM window_embeddings WHERE id = ?;

-- name: delete_vector
DELETE FROM window_vectors WHERE id = ?;

-- name: delete_float32_vector
DELETE FROM window_vectors_float32 WHERE id = ?;

-- name: delete_vector_bits
DELETE FROM window_vector_bits WHERE embedding_id = ?;

-- name: unscope_content
-- The purged document's project holds no other window with this content: its searches stop
-- scanning the content's sign bits (other projects keep theirs, and the vector stays).
WITH purged (project_id) AS (SELECT project_id FROM documents WHERE id = :row)
DELETE FROM window_vector_bits
WHERE project_id = (SELECT project_id FROM purged)
  AND embedding_id IN (SELECT id FROM window_embeddings
                       WHERE substr(content_hash, 1, 8) = substr(:hash, 1, 8) AND content_hash = :hash)
  AND NOT EXISTS (
    SELECT 1 FROM windows AS w JOIN documents AS d ON d.id = w.document_row
    WHERE substr(w.content_hash, 1, 8) = substr(:hash, 1, 8) AND w.content_hash = :hash
      AND d.project_id = (SELECT project_id FROM purged)
  );

-- name: dequeue_content_if_unreferenced
-- A content no window holds any more waits neither to be embedded nor for its other pieces.
DELETE FROM embedding_queue
WHERE content_hash = :hash AND NOT EXISTS (
  SELECT 1 FROM windows WHERE substr(content_hash, 1, 8) = substr(:hash, 1, 8) AND content_hash = :hash);
DELETE FROM embedding_refresh
WHERE content_hash = :hash AND NOT EXISTS (
  SELECT 1 FROM windows WHERE substr(content_hash, 1, 8) = substr(:hash, 1, 8) AND content_hash = :hash);

-- name: delete_feedback_of
DELETE FROM recall_feedback WHERE document_row = ?;

-- name: delete_exposures_of
DELETE FROM hint_exposures WHERE document_row = ?;

-- name: forget_metadata
-- Redaction also removes what the host attached to the document.
UPDATE documents SET metadata = NULL WHERE id = ?;

-- name: done_purge
DELETE FROM purge_queue WHERE document_row = ?;

-- name: forget_term_counts
-- After a purge, so no term a purged document held outlives it there, and after an index
-- rebuild: the kept counts of common terms go (counted again on demand; cwa/store/term_counts.py).
DELETE FROM term_counts;

-- name: common_terms
-- Every term in more than ? windows, with its window count: one read of the whole vocabulary
-- (fts5vocab counts every posting list: most of a 4 s `cwa maintain` at a million windows).
SELECT term, doc FROM window_vocab WHERE doc > ?;

-- name: subtract_windows
UPDATE index_stats SET value = max(0, value - ?) WHERE name = 'windows';

-- name: meta_get
SELECT value FROM meta WHERE key = ?;

-- name: meta_set
INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value;

-- name: meta_set_if_missing
-- The plan admissions schedule by, recorded unless documents from before the schedule still
-- await their first full plan (migration 0006 marks that with `retention_backfill`).
INSERT OR IGNORE INTO meta (key, value)
SELECT ?, ? WHERE NOT EXISTS (SELECT 1 FROM meta WHERE key = 'retention_backfill');

-- name: backfill_done
DELETE FROM meta WHERE key = 'retention_backfill';

-- name: indexed_successor
-- The document just after the given one in its session (creation order, then row), when it has
-- windows: its lexical context may hold the given document's terms (cwa/index/lexical.py).
SELECT n.id FROM documents AS d
JOIN documents AS n ON n.id = (
  SELECT q.id FROM documents AS q
  WHERE q.session_id = d.session_id
    AND (q.created_at > d.created_at OR q.created_at = d.created_at AND q.id > d.id)
    AND q.state IN ('live', 'superseded')
  ORDER BY q.created_at, q.id LIMIT 1)
WHERE d.id = ? AND EXISTS (SELECT 1 FROM windows AS w WHERE w.document_row = n.id);
