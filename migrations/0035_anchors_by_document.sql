-- A document's anchor rows lie together, keyed by the document first, and each anchor text's
-- documents are found through `anchor_postings`, an FTS5 index of a token `a<text id>` per text a
-- document holds (contentless, no positions: rowid = the document's row).
-- Keyed by text first, a document's dozen anchors were a dozen rows far apart in a large
-- archive: at a million windows one coding document's commit wrote 14 pages of `anchors` and two
-- of `anchors_document` (`python eval/perf/admission.py --frames --into COPY`), each page copied
-- again by the next checkpoint. Now its rows are one run at the end of the table, and FTS5 writes
-- the postings of a transaction's documents as one new segment, merged later in bulk. The index
-- of rows by document (`anchors_document`) is gone: it is the table's own order.
CREATE TABLE anchors_by_document (
  document_row   INTEGER NOT NULL REFERENCES documents (id),
  text_id        INTEGER NOT NULL REFERENCES anchor_texts (id),
  types          INTEGER NOT NULL,     -- bit (1 << anchor_types.id) per type the text was found as
  start_byte     INTEGER NOT NULL,     -- first occurrence in the document, as its most specific type
  end_byte       INTEGER NOT NULL,
  occurrences    INTEGER NOT NULL,     -- occurrences as that type
  PRIMARY KEY (document_row, text_id)
) WITHOUT ROWID;

INSERT INTO anchors_by_document (document_row, text_id, types, start_byte, end_byte, occurrences)
SELECT document_row, text_id, types, start_byte, end_byte, occurrences FROM anchors
ORDER BY document_row, text_id;

DROP TABLE anchors;
ALTER TABLE anchors_by_document RENAME TO anchors;

CREATE VIRTUAL TABLE anchor_postings USING fts5(
  texts, content = '', contentless_delete = 1, detail = none, tokenize = 'ascii'
);

INSERT INTO anchor_postings (rowid, texts)
SELECT document_row, group_concat('a' || text_id, ' ') FROM anchors GROUP BY document_row;
