-- Views for direct inspection, e.g.
--   sqlite3 archive.db "select * from live_documents order by created_at desc limit 5"
-- Recreated when this file changes (cwa compares its digest at open).
-- Tables keep a document's times as epoch milliseconds (migration 0030); the views show them as
-- UTC ISO-8601 with milliseconds (2026-11-29T23:10:00.000Z), which sorts as text.

-- Each document's text digest (blake3, 32 bytes). A document of one chunk stores x'' and its
-- digest is that chunk's hash (the same blake3 of the same bytes), kept once (migration 0037);
-- named statements read a digest through this view.
DROP VIEW IF EXISTS document_digests;
CREATE VIEW document_digests AS
SELECT
  d.id AS document_row,
  CASE WHEN d.text_digest != x'' THEN d.text_digest
       ELSE (SELECT c.hash FROM document_chunks AS dc JOIN chunks AS c ON c.id = dc.chunk_id
             WHERE dc.document_row = d.id AND dc.ordinal = 0) END AS text_digest
FROM documents AS d;

DROP VIEW IF EXISTS live_documents;
DROP VIEW IF EXISTS document_overview;
CREATE VIEW document_overview AS
SELECT
  d.document_id,
  d.version,
  p.identity            AS project,
  s.session_key         AS session_id,
  d.kind,
  d.retention_class,
  strftime('%Y-%m-%dT%H:%M:%fZ', d.created_at / 1000.0, 'unixepoch') AS created_at,
  d.byte_length,
  d.state,
  d.pinned,
  d.subject_key,
  sup.document_id       AS supersedes_document_id,
  sup.version           AS supersedes_version,
  rep.document_id       AS superseded_by_document_id,
  rep.version           AS superseded_by_version,
  d.source_key_count,
  (SELECT message_key FROM messages WHERE document_row = d.id AND ordinal = 0) AS first_source_key,
  (SELECT message_key FROM messages WHERE document_row = d.id AND ordinal = d.source_key_count - 1)
                        AS last_source_key,
  lower(hex((SELECT text_digest FROM document_digests WHERE document_row = d.id))) AS text_digest,
  d.index_generation,
  strftime('%Y-%m-%dT%H:%M:%fZ', d.admitted_at / 1000.0, 'unixepoch') AS admitted_at,
  d.id                  AS document_row
FROM documents AS d
JOIN projects AS p ON p.id = d.project_id
JOIN sessions AS s ON s.id = d.session_id
LEFT JOIN documents AS sup ON sup.id = d.supersedes_row
LEFT JOIN supersessions AS x ON x.superseded_row = d.id
LEFT JOIN documents AS rep ON rep.id = x.replacement_row;

CREATE VIEW live_documents AS
SELECT * FROM document_overview WHERE state = 'live';

DROP VIEW IF EXISTS document_messages;
CREATE VIEW document_messages AS
SELECT
  d.document_id,
  d.version,
  m.ordinal,
  m.message_key,
  m.role,
  m.tool_name,
  m.tool_call_id,
  strftime('%Y-%m-%dT%H:%M:%fZ', m.timestamp / 1000.0, 'unixepoch') AS timestamp,
  m.start_byte,
  m.text_start,
  m.end_byte
FROM messages AS m
JOIN documents AS d ON d.id = m.document_row;

DROP VIEW IF EXISTS document_texts;
CREATE VIEW document_texts AS
SELECT
  d.document_id,
  d.version,
  (SELECT group_concat(CAST(sqlar_uncompress(t.data, t.byte_length) AS TEXT), '')
     FROM (SELECT c.data, c.byte_length FROM document_chunks AS dc
           JOIN chunks AS c ON c.id = dc.chunk_id
           WHERE dc.document_row = d.id
           ORDER BY dc.ordinal) AS t) AS text,
  d.id AS document_row
FROM documents AS d;

DROP VIEW IF EXISTS session_lineage;
CREATE VIEW session_lineage AS
SELECT
  p.identity       AS project,
  s.session_key    AS session_id,
  parent.session_key AS parent_session_id,
  s.created_at,
  (SELECT count(*) FROM documents AS d WHERE d.session_id = s.id) AS documents
FROM sessions AS s
JOIN projects AS p ON p.id = s.project_id
LEFT JOIN sessions AS parent ON parent.id = s.parent_id;

DROP VIEW IF EXISTS index_status;
-- Each handler of the document's generation; one without an outcome row completed (migration 0027).
CREATE VIEW index_status AS
SELECT
  d.document_id,
  d.version,
  g.id AS generation_id,
  h.name AS handler,
  coalesce(k.name, 'complete') AS outcome,
  o.detail,
  d.id AS document_row
FROM documents AS d
JOIN index_generations AS g ON g.id = d.index_generation
JOIN index_handlers AS h ON g.handlers & (1 << h.id) != 0
LEFT JOIN index_outcomes AS o ON o.document_row = d.id AND o.generation_id = g.id AND o.handler_id = h.id
LEFT JOIN index_outcome_kinds AS k ON k.code = o.outcome;

-- Every message of every session in the order it was written (document creation time, document
-- row, message ordinal): the records gather and traverse return (cwa/retrieve/chronology.py).
-- Checkpoint parts are slices of an archived input, whose root stands for it. `created_ms` is the
-- creation time as stored, which an ordered read of one session seeks by (an index).
DROP VIEW IF EXISTS session_records;
CREATE VIEW session_records AS
SELECT d.id AS document_row, d.document_id, d.version, d.kind,
       strftime('%Y-%m-%dT%H:%M:%fZ', d.created_at / 1000.0, 'unixepoch') AS created_at, d.state, d.session_id AS session_row,
       s.session_key AS session_id, p.identity AS project, d.subject_key, m.ordinal, m.message_key, m.role,
       strftime('%Y-%m-%dT%H:%M:%fZ', m.timestamp / 1000.0, 'unixepoch') AS timestamp, m.text_start, m.end_byte, d.created_at AS created_ms
FROM documents AS d
JOIN messages AS m ON m.document_row = d.id
JOIN sessions AS s ON s.id = d.session_id
JOIN projects AS p ON p.id = d.project_id
WHERE d.kind != 'checkpoint-part';
