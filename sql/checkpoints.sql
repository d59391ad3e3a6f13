-- Checkpoint parts and their roots (cwa/store/checkpoint_parts.py, migration 0009).

-- name: link_part
-- A part named by a committed root's manifest (of the same project); the first root wins.
INSERT OR IGNORE INTO checkpoint_parts (part_row, root_row)
SELECT p.id, :root FROM documents AS p
WHERE (substr(p.identity_digest, 1, 8) = unhex(substr(:document_id, 5, 16)) OR p.named_id = :document_id)
  AND p.document_id = :document_id AND p.version = :version AND p.kind = 'checkpoint-part'
  AND +p.project_id = (SELECT project_id FROM documents WHERE id = :root);  -- `+`: found by id

-- name: unindexed_parts
-- Linked parts still without derived rows (indexed after their root commits, one at a time).
SELECT d.id, d.byte_length FROM checkpoint_parts AS c JOIN documents AS d ON d.id = c.part_row
WHERE d.index_generation IS NULL AND d.state = 'live' AND (:root IS NULL OR c.root_row = :root)
ORDER BY d.id LIMIT :limit;

-- name: unindexed_part_count
-- How many linked parts of one root still have no derived rows.
SELECT count(*) FROM checkpoint_parts AS c JOIN documents AS d ON d.id = c.part_row
WHERE c.root_row = :root AND d.index_generation IS NULL AND d.state = 'live';

-- name: orphan_parts
-- Live parts no root names, admitted before :before: what a killed or failed checkpoint left.
SELECT d.id FROM documents AS d
WHERE d.kind = 'checkpoint-part' AND d.state = 'live' AND d.admitted_at < round(unixepoch(:before, 'subsec') * 1000)
  AND NOT EXISTS (SELECT 1 FROM checkpoint_parts AS c WHERE c.part_row = d.id)
ORDER BY d.id LIMIT :limit;

-- name: orphan_count
SELECT count(*) FROM documents AS d
WHERE d.kind = 'checkpoint-part' AND d.state = 'live'
  AND NOT EXISTS (SELECT 1 FROM checkpoint_parts AS c WHERE c.part_row = d.id);

-- name: release_identity
-- An expired orphan no longer answers a retry of its checkpoint: the retry writes a fresh part.
-- Its id, derived from the identity until now (migration 0039), is kept in `named_id`.
UPDATE documents SET named_id = document_id, identity_digest = 'orphan:' || lower(hex(identity_digest)) WHERE id = :row
  AND typeof(identity_digest) = 'blob';
