-- cwa: rebuilds anchors
-- A document's anchors packed into one row (cwa/store/anchor_lists.py): five varints an anchor,
-- in text id order, instead of a row per (document, text). At a million coding documents the rows
-- took 22.7 bytes of pages each (303.0 MB for 13,350,655 anchors, 0.54 × the text), the lists 7.3
-- bytes an anchor (97.2 MB): `python eval/perf/upgrade.py --archive COPY --pages anchors`
-- (docs/performance.md, "Anchors packed into one list a document"). The rows are packed by `cwa_pack_anchors`, which cwa
-- registers before it migrates; the rowid table is appended in document order and fills its pages.
-- Exact search reads a text's range with `cwa_anchor_start` / the list in Python; a text's
-- documents still come from `anchor_postings`. One transaction: a killed process leaves schema 41,
-- and the next open starts again.
CREATE TABLE anchors_packed (
  document_row  INTEGER PRIMARY KEY REFERENCES documents (id),
  packed        BLOB NOT NULL        -- (text id delta, types, start_byte, length, occurrences) varints
);

INSERT INTO anchors_packed (document_row, packed)
SELECT document_row, cwa_pack_anchors(text_id, types, start_byte, end_byte, occurrences)
FROM anchors GROUP BY document_row ORDER BY document_row;

DROP TABLE anchors;
ALTER TABLE anchors_packed RENAME TO anchors;
