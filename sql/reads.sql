-- Named queries used by direct reads (cwa/store/reads.py).

-- name: document_version
-- One version of a document (the latest when ?2 is NULL), within project ?3 when it is not NULL:
-- to a caller bound to a project, another project's document does not exist.
-- A document is found by id through the index it is in (migration 0039): a derived id (`doc-` and
-- the identity digest's first 20 hex digits) through the identity's first 8 bytes, a named one (a
-- later version's, a released orphan's) through `named_id`; `document_id` then compares the whole
-- id. Every statement that finds a document by id does the same.
SELECT d.id, d.document_id, d.version, p.identity, s.session_key, parent.session_key, d.kind,
       d.retention_class, strftime('%Y-%m-%dT%H:%M:%fZ', d.created_at / 1000.0, 'unixepoch'),
       strftime('%Y-%m-%dT%H:%M:%fZ', d.admitted_at / 1000.0, 'unixepoch'), d.byte_length, lower(hex((SELECT text_digest FROM document_digests WHERE document_row = d.id))),
       lower(hex(d.identity_digest)), d.source_key_count,
       (SELECT message_key FROM messages WHERE document_row = d.id AND ordinal = 0),
       (SELECT message_key FROM messages WHERE document_row = d.id AND ordinal = d.source_key_count - 1),
       d.subject_key, sup.document_id, sup.version, d.pinned, d.state, d.metadata,
       d.index_generation, d.project_id, rep.document_id, rep.version
FROM documents AS d
JOIN projects AS p ON p.id = d.project_id
JOIN sessions AS s ON s.id = d.session_id
LEFT JOIN sessions AS parent ON parent.id = s.parent_id
LEFT JOIN documents AS sup ON sup.id = d.supersedes_row
LEFT JOIN supersessions AS x ON x.superseded_row = d.id
LEFT JOIN documents AS rep ON rep.id = x.replacement_row
WHERE (substr(d.identity_digest, 1, 8) = unhex(substr(?1, 5, 16)) OR d.named_id = ?1) AND d.document_id = ?1
  AND (?2 IS NULL OR d.version = ?2) AND (?3 IS NULL OR p.identity = ?3)
ORDER BY d.version DESC
LIMIT 1;

-- name: chunk_manifest
-- Reads chunk hashes only; the payload column is never loaded.
SELECT dc.ordinal, dc.start_byte, dc.end_byte, lower(hex(c.hash))
FROM document_chunks AS dc JOIN chunks AS c ON c.id = dc.chunk_id
WHERE dc.document_row = ?
ORDER BY dc.ordinal
LIMIT ?;

-- name: chunk_count
SELECT count(*) FROM document_chunks WHERE document_row = ?;

-- name: chunks_in_range
-- Only the chunks that intersect [start, end) are read (payloads: cwa/store/payloads.py).
SELECT dc.start_byte, dc.end_byte, c.id, c.byte_length, c.data
FROM document_chunks AS dc JOIN chunks AS c ON c.id = dc.chunk_id
WHERE dc.document_row = ?1 AND dc.end_byte > ?2 AND dc.start_byte < ?3
ORDER BY dc.ordinal;

-- name: messages
SELECT message_key, role, tool_name, tool_call_id, strftime('%Y-%m-%dT%H:%M:%fZ', timestamp / 1000.0, 'unixepoch'), start_byte, text_start,
       end_byte
FROM messages
WHERE document_row = ?
ORDER BY ordinal
LIMIT ?;

-- name: outcomes
-- Each handler of the document's generation and how it ended (sql/views.sql: one without an
-- outcome row completed, migration 0027).
SELECT handler, outcome, detail FROM index_status WHERE document_row = ? ORDER BY handler;

-- name: part_text_range
-- Where a checkpoint part's text lies in its document (its one message), for reassembly.
SELECT d.id, m.text_start, m.end_byte
FROM documents AS d JOIN messages AS m ON m.document_row = d.id AND m.ordinal = 0
WHERE (substr(d.identity_digest, 1, 8) = unhex(substr(?1, 5, 16)) OR d.named_id = ?1) AND d.document_id = ?1
  AND d.version = ?2 AND d.kind = 'checkpoint-part'
  AND d.state IN ('live', 'superseded');

-- name: session_checkpoints
-- A session's checkpoint roots, newest first, with their metadata (for the catalog).
SELECT d.document_id, d.metadata
FROM documents AS d
JOIN sessions AS s ON s.id = d.session_id
JOIN projects AS p ON p.id = d.project_id
WHERE p.identity = ? AND s.session_key = ? AND d.kind = 'checkpoint-root' AND d.state = 'live'
ORDER BY d.created_at DESC, d.id DESC;

-- name: locator_secret
-- The archive's signing secret (cwa/store/secret.py), created once by migration 0001.
SELECT value FROM meta WHERE key = 'locator_secret';

-- name: message_at
-- Message coordinates (MessageRow in cwa/store/reads.py): ordinal, key, role, header start,
-- text start, end. This one: the message whose bytes hold a position.
SELECT ordinal, message_key, role, start_byte, text_start, end_byte
FROM messages WHERE document_row = ? AND start_byte <= ? ORDER BY ordinal DESC LIMIT 1;

-- name: message_by_ordinal
SELECT ordinal, message_key, role, start_byte, text_start, end_byte
FROM messages WHERE document_row = ? AND ordinal = ?;

-- name: messages_between
SELECT ordinal, message_key, role, start_byte, text_start, end_byte
FROM messages WHERE document_row = ? AND ordinal BETWEEN ? AND ? ORDER BY ordinal;

-- name: all_messages
SELECT ordinal, message_key, role, start_byte, text_start, end_byte
FROM messages WHERE document_row = ? ORDER BY ordinal;
