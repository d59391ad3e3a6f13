-- Checkpoint parts become usable only with their root (cwa/store/checkpoint_parts.py): a part is
-- admitted without derived rows, and indexed once a committed root names it here. A part that
-- no root names (a checkpoint killed or failed before its root) is an orphan: never searchable,
-- expired by maintenance after a grace period.
CREATE TABLE checkpoint_parts (
  part_row  INTEGER PRIMARY KEY REFERENCES documents (id),
  root_row  INTEGER NOT NULL REFERENCES documents (id)
);
CREATE INDEX checkpoint_parts_root ON checkpoint_parts (root_row);

-- The parts of the roots already in the archive (their manifest is the root's metadata).
INSERT OR IGNORE INTO checkpoint_parts (part_row, root_row)
SELECT p.id, r.id
FROM documents AS r
JOIN json_each(r.metadata, '$.checkpoint.parts') AS j
JOIN documents AS p ON p.document_id = json_extract(j.value, '$[0]') AND p.version = json_extract(j.value, '$[1]')
WHERE r.kind = 'checkpoint-root' AND p.kind = 'checkpoint-part' AND json_valid(r.metadata);
