-- Backfills for archives written by an older cwa, found by building each earlier schema with
-- documents in it and upgrading it (tests/test_migrations.py).

-- Schema 1 had no derived indexes: its documents have no windows, anchors, cues or index
-- outcomes, so search could not find them. The first open after this migration rebuilds the
-- derived indexes (cwa/index/rebuild.py) and removes this marker.
INSERT INTO meta (key, value) SELECT 'index_backfill', 'needed'
WHERE EXISTS (
  SELECT 1 FROM documents AS d
  WHERE d.state IN ('live', 'superseded')
    AND NOT EXISTS (SELECT 1 FROM index_outcomes AS o WHERE o.document_row = d.id));

-- Schemas 2 and 3 had windows but no embedding queue: queue every window content without a
-- vector, so `cwa serve` (which drains only a non-empty queue) embeds them too.
INSERT OR IGNORE INTO embedding_queue (content_hash, enqueued_at)
SELECT DISTINCT w.content_hash, strftime('%Y-%m-%dT%H:%M:%fZ', 'now') FROM windows AS w
WHERE NOT EXISTS (SELECT 1 FROM window_embeddings AS e WHERE e.content_hash = w.content_hash);
