-- Schema 1 had no derived indexes: its documents have no windows, anchors, cues or index
-- outcomes, so search could not find them (tests/test_migrations.py upgrades an archive of every
-- earlier schema). The first open after this migration rebuilds the derived indexes
-- (cwa/index/rebuild.py) and removes this marker.
INSERT INTO meta (key, value) SELECT 'index_backfill', 'needed'
WHERE EXISTS (
  SELECT 1 FROM documents AS d
  WHERE d.state IN ('live', 'superseded')
    AND NOT EXISTS (SELECT 1 FROM index_outcomes AS o WHERE o.document_row = d.id));
