-- Named queries used by admission (cwa/store/admission.py).

-- name: find_by_identity
-- A document by its identity digest (:identity, 32 bytes): found by the digest's first 8 bytes
-- (migration 0036: the index `documents_identity_prefix`), the whole digest compared.
SELECT id, document_id, version, index_generation FROM documents
WHERE substr(identity_digest, 1, 8) = substr(:identity, 1, 8) AND identity_digest = :identity;

-- name: find_project
SELECT id FROM projects WHERE identity = ?;

-- name: insert_project
INSERT INTO projects (identity, created_at) VALUES (?, ?);

-- name: find_session
SELECT id, parent_id FROM sessions WHERE project_id = ? AND session_key = ?;

-- name: insert_session
INSERT INTO sessions (project_id, session_key, parent_id, created_at) VALUES (?, ?, ?, ?);

-- name: set_session_parent
UPDATE sessions SET parent_id = ? WHERE id = ? AND parent_id IS NULL;

-- name: latest_version_of
-- (Found by id as sql/reads.sql `document_version` says.)
SELECT max(version) FROM documents
WHERE (substr(identity_digest, 1, 8) = unhex(substr(?1, 5, 16)) OR named_id = ?1) AND document_id = ?1;

-- name: find_live_subject
SELECT id, document_id, version FROM documents
WHERE project_id = ? AND subject_key = ? AND state = 'live';

-- name: chunk_id
-- A stored chunk by its blake3 digest (:hash): found by the digest's first 8 bytes (migration
-- 0032: the index `chunks_hash_prefix`), the whole digest compared.
SELECT id FROM chunks WHERE substr(hash, 1, 8) = substr(:hash, 1, 8) AND hash = :hash;

-- name: insert_chunk
-- Only a chunk `chunk_id` did not find, in the same write transaction: a content is stored once.
INSERT INTO chunks (hash, byte_length, data) VALUES (:hash, :length, :data);

-- name: insert_generation
-- A document's times (its messages' too), its generation's and its expiry are epoch milliseconds
-- (migration 0030):
-- a statement given a canonical ISO-8601 time converts it with round(unixepoch(t, 'subsec') * 1000),
-- and one returning a time to Python renders it with strftime('%Y-%m-%dT%H:%M:%fZ', ms / 1000.0,
-- 'unixepoch'), so Python sees the canonical form only (cwa/timestamps.py).
INSERT INTO index_generations (reason, started_at) VALUES (?, round(unixepoch(?, 'subsec') * 1000));

-- name: finish_generation
UPDATE index_generations SET finished_at = round(unixepoch(?, 'subsec') * 1000) WHERE id = ?;

-- name: insert_document
-- `document_id` is derived from the identity digest (migration 0039); a document whose id is not
-- its own identity's (a later version keeps its predecessor's) stores it in `named_id`.
INSERT INTO documents (
  named_id, version, project_id, session_id, kind, retention_class, created_at, admitted_at,
  byte_length, text_digest, identity_digest, source_key_count, subject_key, supersedes_row, metadata,
  index_generation
) VALUES (
  nullif(:document_id, 'doc-' || lower(hex(substr(:identity_digest, 1, 10)))),
  :version, :project_id, :session_id, :kind, :retention_class,
  round(unixepoch(:created_at, 'subsec') * 1000), round(unixepoch(:admitted_at, 'subsec') * 1000),
  :byte_length, :text_digest, :identity_digest, :source_key_count, :subject_key,
  :supersedes_row, :metadata, :index_generation
);

-- name: insert_document_chunk
INSERT INTO document_chunks (document_row, ordinal, chunk_id, start_byte, end_byte)
VALUES (?, ?, ?, ?, ?);

-- name: insert_message
INSERT INTO messages (document_row, ordinal, message_key, role, tool_name, tool_call_id, timestamp,
                      start_byte, text_start, end_byte)
VALUES (?, ?, ?, ?, ?, ?, round(unixepoch(?, 'subsec') * 1000), ?, ?, ?);

-- name: message_keys
SELECT message_key FROM messages WHERE document_row = ? ORDER BY ordinal;

-- name: mark_superseded
UPDATE documents SET state = 'superseded', state_changed_at = round(unixepoch(?, 'subsec') * 1000)
WHERE id = ? AND state = 'live';

-- name: name_handlers
-- Each handler that records an outcome has an id (:outcomes as in record_outcomes).
INSERT OR IGNORE INTO index_handlers (name) SELECT value ->> 0 FROM json_each(:outcomes);

-- name: mark_generation_handlers
-- The handlers a generation ran, as bits (:outcomes as in record_outcomes).
UPDATE index_generations
SET handlers = handlers | (SELECT sum(DISTINCT 1 << h.id) FROM json_each(:outcomes) AS j
                           JOIN index_handlers AS h ON h.name = j.value ->> 0)
WHERE id = :generation;

-- name: add_generation_handlers
-- The same, given the bits (handlers whose ids the schema fixed, cwa/store/derived.py).
UPDATE index_generations SET handlers = handlers | ? WHERE id = ?;

-- name: record_outcomes
-- One document's exceptional outcomes in one generation (:outcomes is a JSON array of [handler,
-- outcome, detail]); a plain `complete` is not a row (migration 0027).
INSERT INTO index_outcomes (document_row, generation_id, handler_id, outcome, detail)
SELECT :row, :generation, h.id, k.code, j.value ->> 2
FROM json_each(:outcomes) AS j
JOIN index_handlers AS h ON h.name = j.value ->> 0
JOIN index_outcome_kinds AS k ON k.name = j.value ->> 1;
