-- Named queries used by the index handlers and rebuild (cwa/index/).

-- name: insert_window
INSERT INTO windows (document_row, ordinal, start_byte, end_byte, first_message, last_message,
                     term_count, content_hash)
VALUES (?, ?, ?, ?, ?, ?, ?, ?);

-- name: insert_window_fts
INSERT INTO window_fts (rowid, title, user, assistant, body) VALUES (?, ?, ?, ?, ?);

-- name: insert_anchor
INSERT INTO anchors (document_row, type, text, folded, specificity, start_byte, end_byte, occurrences)
VALUES (?, ?, ?, ?, ?, ?, ?, ?);

-- name: insert_cue
INSERT INTO message_cues (document_row, ordinal, cue, score) VALUES (?, ?, ?, ?);

-- name: add_windows
UPDATE index_stats SET value = value + ? WHERE name = 'windows';

-- name: reset_window_count
UPDATE index_stats SET value = 0 WHERE name = 'windows';

-- name: delete_window_fts
DELETE FROM window_fts;

-- name: delete_windows
DELETE FROM windows;

-- name: delete_anchors
DELETE FROM anchors;

-- name: delete_cues
DELETE FROM message_cues;

-- name: delete_outcomes
DELETE FROM index_outcomes;

-- name: all_documents
SELECT id, kind, byte_length FROM documents WHERE state IN ('live', 'superseded') ORDER BY id;

-- name: document_messages
SELECT message_key, role, tool_name, tool_call_id, timestamp, start_byte, text_start, end_byte
FROM messages WHERE document_row = ? ORDER BY ordinal;

-- name: set_generation
UPDATE documents SET index_generation = ? WHERE id = ?;

-- name: backfill_needed
-- Set by migration 0007 when documents from schema 1 have no derived rows yet.
SELECT count(*) FROM meta WHERE key = 'index_backfill';

-- name: backfill_done
DELETE FROM meta WHERE key = 'index_backfill';
