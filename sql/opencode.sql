-- Named queries over OpenCode's own database, opened read-only (cwa/capture/opencode.py).

-- name: sessions
-- Every session with what changes when it grows, and its size in bytes (for progress).
SELECT s.id, s.time_updated,
       (SELECT count(*) FROM part AS p WHERE p.session_id = s.id),
       (SELECT coalesce(sum(length(p.data)), 0) FROM part AS p WHERE p.session_id = s.id)
FROM session AS s ORDER BY s.time_created, s.id;

-- name: session
SELECT parent_id, directory FROM session WHERE id = ?;

-- name: messages
SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id;

-- name: parts
SELECT message_id, data FROM part WHERE session_id = ? ORDER BY message_id, id;
