-- Named queries about sessions and their lineage (cwa/store/sessions.py).

-- name: session_row
SELECT id FROM sessions WHERE project_id = ? AND session_key = ?;

-- name: session_ancestry
-- The one walk of the parent links: a session (:session, a row id) and its recorded ancestors,
-- nearest first, at most :depth links up (a cycle, if one were ever written, ends there too).
WITH RECURSIVE chain (id, parent_id, depth) AS (
  SELECT id, parent_id, 0 FROM sessions WHERE id = :session
  UNION ALL
  SELECT s.id, s.parent_id, c.depth + 1 FROM sessions AS s JOIN chain AS c ON s.id = c.parent_id
  WHERE c.depth < :depth
)
SELECT chain.id, s.session_key FROM chain JOIN sessions AS s ON s.id = chain.id ORDER BY chain.depth;
