-- Anchors stored once: each distinct anchor text (and its case-folded form) is a row of the
-- dictionary `anchor_texts`; a document's anchors name it by id. Before, every (document, anchor)
-- row held the text twice (the row and the `anchors_text` index) and its folded form a third
-- time, its type's name and specificity: on coding sessions the exact postings were 2.7 times
-- the text they index. A type is now a small id into `anchor_types`, which holds each type's name
-- and specificity (cwa/index/exact.py SPECIFICITY).
CREATE TABLE anchor_types (
  id           INTEGER PRIMARY KEY,
  name         TEXT NOT NULL UNIQUE,
  specificity  REAL NOT NULL        -- how strongly one exact hit of this type identifies a source
);
INSERT INTO anchor_types (id, name, specificity) VALUES
  (1, 'error', 0.95), (2, 'path', 0.90), (3, 'url', 0.90), (4, 'commit', 0.85),
  (5, 'quoted', 0.80), (6, 'symbol', 0.75), (7, 'value', 0.60);

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
  type_id        INTEGER NOT NULL REFERENCES anchor_types (id),
  start_byte     INTEGER NOT NULL,     -- first occurrence in the document
  end_byte       INTEGER NOT NULL,
  occurrences    INTEGER NOT NULL,
  PRIMARY KEY (text_id, document_row, type_id)
) WITHOUT ROWID;

INSERT INTO anchors_by_text (text_id, document_row, type_id, start_byte, end_byte, occurrences)
SELECT t.id, a.document_row, k.id, a.start_byte, a.end_byte, a.occurrences
FROM anchors AS a JOIN anchor_texts AS t ON t.text = a.text JOIN anchor_types AS k ON k.name = a.type;

DROP TABLE anchors;
ALTER TABLE anchors_by_text RENAME TO anchors;
-- A document's anchors, for its purge and rebuild (and the foreign key from documents).
CREATE INDEX anchors_document ON anchors (document_row);
