-- One anchor row per (text, document) instead of one per (type, text, document): a text found
-- as several types (ERR_LOCK_TIMEOUT is an error code and a symbol, a path's parts are paths and
-- often symbols) took a row, and an entry of `anchors_document`, for each. Its types are now the
-- bits of `types` (1 << anchor_types.id); its byte range and occurrence count are those of its
-- most specific type (the lowest id), the row exact search read first before. On coding sessions
-- about one anchor row in five was such a repeat.
CREATE TABLE anchors_merged (
  text_id        INTEGER NOT NULL REFERENCES anchor_texts (id),
  document_row   INTEGER NOT NULL REFERENCES documents (id),
  types          INTEGER NOT NULL,     -- bit (1 << anchor_types.id) per type the text was found as
  start_byte     INTEGER NOT NULL,     -- first occurrence in the document, as its most specific type
  end_byte       INTEGER NOT NULL,
  occurrences    INTEGER NOT NULL,     -- occurrences as that type
  PRIMARY KEY (text_id, document_row)
) WITHOUT ROWID;

INSERT INTO anchors_merged (text_id, document_row, types, start_byte, end_byte, occurrences)
SELECT a.text_id, a.document_row, m.types, a.start_byte, a.end_byte, a.occurrences
FROM (
  SELECT text_id, document_row, min(type_id) AS first_type, sum(1 << type_id) AS types
  FROM anchors GROUP BY text_id, document_row
) AS m
JOIN anchors AS a ON a.text_id = m.text_id AND a.document_row = m.document_row AND a.type_id = m.first_type;

DROP TABLE anchors;
ALTER TABLE anchors_merged RENAME TO anchors;
-- A document's anchors, for its purge and rebuild (and the foreign key from documents).
CREATE INDEX anchors_document ON anchors (document_row);
