-- Ordering signals of the lexical/semantic tier that are not about the query: the importance
-- prior and conversation neighbours (cwa/retrieve/importance.py, cwa/retrieve/neighbors.py).

-- name: importance_signals
-- Query-independent signals of the given documents (:rows is a JSON array of document rows).
SELECT d.id, d.pinned, d.kind, d.version, d.source_key_count,
       EXISTS (SELECT 1 FROM message_cues AS c WHERE c.document_row = d.id AND c.cue = 'decision')
         AS has_decision,
       (SELECT count(DISTINCT coalesce(f.lease_id, 'row:' || f.id)) FROM recall_feedback AS f
        WHERE f.document_row = d.id) AS recalls  -- continuations under one lease count once
FROM documents AS d
WHERE d.id IN (SELECT value FROM json_each(:rows));

-- name: record_recall
INSERT INTO recall_feedback (document_row, recalled_at, lease_id) VALUES (?, ?, ?);

-- name: session_neighbors
-- For each given document, the live documents just before and just after it in its session
-- (creation order, then row): their row and the window nearest the shared boundary.
WITH given AS (SELECT value AS row FROM json_each(:rows)),
near AS (
  SELECT g.row AS found,
         (SELECT p.id FROM documents AS p
          WHERE p.session_id = d.session_id AND p.state = 'live'
            AND (p.created_at < d.created_at OR p.created_at = d.created_at AND p.id < d.id)
          ORDER BY p.created_at DESC, p.id DESC LIMIT 1) AS before_row,
         (SELECT n.id FROM documents AS n
          WHERE n.session_id = d.session_id AND n.state = 'live'
            AND (n.created_at > d.created_at OR n.created_at = d.created_at AND n.id > d.id)
          ORDER BY n.created_at, n.id LIMIT 1) AS after_row
  FROM given AS g JOIN documents AS d ON d.id = g.row
)
SELECT found, before_row,
       (SELECT w.id FROM windows AS w WHERE w.document_row = before_row ORDER BY w.ordinal DESC LIMIT 1),
       after_row,
       (SELECT w.id FROM windows AS w WHERE w.document_row = after_row ORDER BY w.ordinal LIMIT 1)
FROM near;

-- name: window_vectors
-- The stored embeddings of the given windows (:ids is a JSON array of window ids), one a piece
-- of a long window; a window whose content is not embedded yet has no row. int8, or float32
-- until converted (cwa/store/vector_format.py).
SELECT w.id, coalesce(v.embedding, f.embedding)
FROM windows AS w
JOIN window_embeddings AS e  -- by the digest's first 8 bytes, then whole (sql/semantic.sql)
  ON substr(e.content_hash, 1, 8) = substr(w.content_hash, 1, 8) AND e.content_hash = w.content_hash
LEFT JOIN window_vectors AS v ON v.id = e.id
LEFT JOIN window_vectors_float32 AS f ON f.id = e.id
WHERE w.id IN (SELECT value FROM json_each(:ids)) AND (v.id IS NOT NULL OR f.id IS NOT NULL);

-- name: created_at
-- When each given document (:rows is a JSON array of document rows) was created.
SELECT id, created_at FROM documents WHERE id IN (SELECT value FROM json_each(:rows));

-- name: message_roles
-- The role of the first and of the last message of each given document (:rows is a JSON array
-- of document rows).
SELECT g.value,
       (SELECT m.role FROM messages AS m WHERE m.document_row = g.value ORDER BY m.ordinal LIMIT 1),
       (SELECT m.role FROM messages AS m WHERE m.document_row = g.value ORDER BY m.ordinal DESC LIMIT 1)
FROM json_each(:rows) AS g;
