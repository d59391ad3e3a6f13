-- Anchors stored once: each distinct anchor text (and its case-folded form) is a row of the
-- dictionary `anchor_texts`; a document's anchors name it by id. Before, every (document, anchor)
-- row held the text twice (the row and the `anchors_text` index) and its folded form a third
-- time, and a per-type specificity column: on coding sessions the exact postings were 2.7 times
-- the text they index. Specificity follows from the type (cwa/index/exact.py SPECIFICITY).
CREATE TABLE anchor_texts (
  id      INTEGER PRIMARY KEY,
  text    TEXT NOT NULL UNIQUE,  -- case-sensitive
  folded  TEXT                   -- NFKC + case-folded; NULL when equal to text
);
CREATE INDEX anchor_texts_folded ON anchor_texts (folded) WHERE folded IS NOT NULL;

INSERT INTO anchor_texts (text, folded)
SELECT text, max(folded) FROM anchors GROUP BY text ORDER BY min(document_row), text;

CREATE TABLE anchors_by_text (
  text_id        INTEGER NOT NULL REFERENCES anchor_texts (id),
  document_row   INTEGER NOT NULL REFERENCES documents (id),
  type           TEXT NOT NULL CHECK (type IN ('path', 'symbol', 'commit', 'error', 'quoted',
                     'url', 'value')),
  start_byte     INTEGER NOT NULL,     -- first occurrence in the document
  end_byte       INTEGER NOT NULL,
  occurrences    INTEGER NOT NULL,
  PRIMARY KEY (text_id, document_row, type)
) WITHOUT ROWID;

INSERT INTO anchors_by_text (text_id, document_row, type, start_byte, end_byte, occurrences)
SELECT t.id, a.document_row, a.type, a.start_byte, a.end_byte, a.occurrences
FROM anchors AS a JOIN anchor_texts AS t ON t.text = a.text;

DROP TABLE anchors;
ALTER TABLE anchors_by_text RENAME TO anchors;
-- A document's anchors, for its purge and rebuild (and the foreign key from documents).
CREATE INDEX anchors_document ON anchors (document_row);
