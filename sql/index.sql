-- Named queries used by the index handlers and rebuild (cwa/index/).

-- name: insert_window
-- The id is the handler's (its project's block, cwa/index/lexical.py), or NULL: the next rowid.
INSERT INTO windows (id, document_row, ordinal, start_byte, end_byte, first_message, last_message,
                     term_count, content_hash)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: next_window_id
-- The id after the largest in the block of the document's project ((row - 1) << :bits, so the
-- first project's block is block 0; cwa/index/lexical.py):
-- one seek in the windows' rowid tree; the block's first id when it holds none yet. A project
-- whose range starts below its block (windows indexed before blocks) keeps taking ids from the
-- shared block 0, where they were, unless a rebuild (:fresh) is moving its windows.
SELECT coalesce((SELECT max(w.id) FROM windows AS w
                 WHERE w.id > block.base AND w.id < block.base + (1 << :bits)), block.base) + 1
FROM (SELECT CASE WHEN NOT :fresh AND s.low < ((d.project_id - 1) << :bits) THEN 0
                  ELSE (d.project_id - 1) << :bits END AS base
      FROM documents AS d LEFT JOIN project_window_spans AS s ON s.project_row = d.project_id
      WHERE d.id = :row) AS block;

-- name: insert_window_fts
INSERT INTO window_fts (rowid, title, user, assistant, body, context) VALUES (?, ?, ?, ?, ?, ?);

-- name: previous_in_session
-- The last message of the readable document just before :row in its session (creation order,
-- then row; a row-value range on documents_session_created, walked backwards), and that
-- document's kind and digest. One join: the first row is the answer (its digest read for it alone).
SELECT q.id, q.kind, (SELECT text_digest FROM document_digests WHERE document_row = q.id), m.text_start, m.end_byte
FROM documents AS d
JOIN documents AS q ON q.session_id = d.session_id AND (q.created_at, q.id) < (d.created_at, d.id)
JOIN messages AS m ON m.document_row = q.id
WHERE d.id = :row AND q.state IN ('live', 'superseded')
ORDER BY q.created_at DESC, q.id DESC, m.ordinal DESC LIMIT 1;

-- name: find_anchor_texts
-- The ids of a document's anchor texts the dictionary holds (:anchors is a JSON array of
-- [text, folded or null, type bits, start_byte, end_byte, occurrences, key], one per text): each
-- as (position in :anchors, id). The dictionary is found by key, then text (migration 0041).
SELECT j.key, t.id FROM json_each(:anchors) AS j
JOIN anchor_texts AS t ON t.key = j.value ->> 6 AND t.text = j.value ->> 0;

-- name: insert_anchor_texts
-- The texts find_anchor_texts did not find (:anchors, rows as there), each returned with its id.
INSERT INTO anchor_texts (text, folded, key)
SELECT j.value ->> 0, j.value ->> 1, j.value ->> 6 FROM json_each(:anchors) AS j
RETURNING text, id;

-- name: insert_anchors
-- The document's anchors, one row: :packed lists each text's id, types and range
-- (cwa/store/anchor_lists.py, migration 0042).
INSERT INTO anchors (document_row, packed) VALUES (:row, :packed);

-- name: insert_anchor_postings
-- The document's row under each of its anchor texts (:texts, `a<text id>` each, space-separated),
-- for exact search. VALUES, not a SELECT: a statement that may write many rows opens a statement
-- journal, at which FTS5 writes what it holds as a segment (cwa/store/derived.py, FullTextRows).
INSERT INTO anchor_postings (rowid, texts) VALUES (:row, :texts);

-- name: insert_cue
INSERT INTO message_cues (document_row, ordinal, cue, score) VALUES (?, ?, ?, ?);

-- name: add_windows
UPDATE index_stats SET value = value + ? WHERE name = 'windows';

-- name: extend_project_span
-- A document's new windows (ids :low to :high) widen its project's window range (migration 0026).
INSERT INTO project_window_spans (project_row, low, high)
SELECT project_id, :low, :high FROM documents WHERE id = :row
ON CONFLICT (project_row) DO UPDATE SET low = min(low, excluded.low), high = max(high, excluded.high);

-- name: recompute_project_spans
-- After a rebuild: every project's range exactly as its windows now lie.
DELETE FROM project_window_spans;
INSERT INTO project_window_spans (project_row, low, high)
SELECT d.project_id, min(w.id), max(w.id)
FROM windows AS w JOIN documents AS d ON d.id = w.document_row
GROUP BY d.project_id;

-- name: all_documents
-- The documents that get derived rows: live or superseded, a checkpoint part only with its root
-- (an orphan stays without them); each with its kind and length, :limit of them past row :after
-- (a rebuild reads them a page at a time: a million at once would hold a million tuples).
SELECT id, kind, byte_length FROM documents AS d WHERE id > :after AND state IN ('live', 'superseded')
  AND (kind != 'checkpoint-part' OR EXISTS (SELECT 1 FROM checkpoint_parts AS c WHERE c.part_row = d.id))
ORDER BY id LIMIT :limit;

-- name: count_documents
-- How many all_documents lists (its conditions, counted).
SELECT count(*) FROM documents AS d WHERE state IN ('live', 'superseded')
  AND (kind != 'checkpoint-part' OR EXISTS (SELECT 1 FROM checkpoint_parts AS c WHERE c.part_row = d.id));

-- name: indexable_document
-- One of them, still qualifying: its kind and length.
SELECT kind, byte_length FROM documents AS d WHERE id = ? AND state IN ('live', 'superseded')
  AND (kind != 'checkpoint-part' OR EXISTS (SELECT 1 FROM checkpoint_parts AS c WHERE c.part_row = d.id));

-- name: stale_derived_documents
-- Documents holding derived rows they should not have (gone from every mode, or orphan parts).
SELECT document_row FROM (
  SELECT document_row FROM windows UNION SELECT document_row FROM anchors
  UNION SELECT document_row FROM message_cues
) AS held JOIN documents AS d ON d.id = held.document_row
WHERE d.state NOT IN ('live', 'superseded')
   OR d.kind = 'checkpoint-part' AND NOT EXISTS (SELECT 1 FROM checkpoint_parts AS c WHERE c.part_row = d.id);

-- name: recount_windows
-- After a rebuild: the BM25 window total is what the windows table holds.
UPDATE index_stats SET value = (SELECT count(*) FROM windows) WHERE name = 'windows';

-- name: drop_stray_fts_rows
-- After a rebuild: BM25F rows whose window no longer exists (only a damaged archive has them).
DELETE FROM window_fts WHERE rowid NOT IN (SELECT id FROM windows);

-- name: document_messages
SELECT message_key, role, tool_name, tool_call_id, strftime('%Y-%m-%dT%H:%M:%fZ', timestamp / 1000.0, 'unixepoch'), start_byte, text_start,
       end_byte
FROM messages WHERE document_row = ? ORDER BY ordinal;

-- name: set_generations
-- The documents one generation indexed (:rows, a JSON array of document rows), marked with it in
-- one statement (cwa/store/derived.py `Generation`: as it finishes, or at the end of each of a
-- rebuild's transactions).
UPDATE documents SET index_generation = :generation WHERE id IN (SELECT value FROM json_each(:rows));

-- name: backfill_needed
-- Set by migration 0007 when documents from schema 1 have no derived rows yet.
SELECT count(*) FROM meta WHERE key = 'index_backfill';

-- name: backfill_done
DELETE FROM meta WHERE key = 'index_backfill';
