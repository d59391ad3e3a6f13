-- cwa: rebuilds anchor_texts
-- The anchor dictionary found by a short key of each text instead of a UNIQUE index of the texts.
-- That index held every text again (about 170 bytes a coding document of 561 bytes of text,
-- 0.30 × it: docs/performance.md, "Where the bytes go"); an index of `key`, the first three bytes
-- of the text's blake3 (cwa/store/anchor_keys.py, here the SQL function `cwa_anchor_key` that cwa
-- registers before it migrates), holds three bytes and the row id. Admission and exact search
-- look a text up by its key and compare the text itself, so two texts sharing a key stay two
-- rows; cwa keeps each text once (it looks before it inserts, inside its write transaction).
-- SQL on the file that finds a text by `text = …` reads the whole dictionary.
--
-- A UNIQUE constraint is part of the table, so the table is made again (ids kept: every anchor
-- row and posting that names a text still does). One transaction: a killed process leaves schema
-- 40, and the next open starts again.
CREATE TABLE anchor_texts_keyed (
  id      INTEGER PRIMARY KEY,
  text    TEXT NOT NULL,         -- case-sensitive
  folded  TEXT,                  -- NFKC + case-folded; NULL when equal to text
  key     INTEGER NOT NULL       -- cwa_anchor_key(text): blake3's first three bytes, signed
);
INSERT INTO anchor_texts_keyed (id, text, folded, key)
SELECT id, text, folded, cwa_anchor_key(text) FROM anchor_texts ORDER BY id;
DROP TABLE anchor_texts;
ALTER TABLE anchor_texts_keyed RENAME TO anchor_texts;

CREATE INDEX anchor_texts_key ON anchor_texts (key);
CREATE INDEX anchor_texts_folded ON anchor_texts (folded) WHERE folded IS NOT NULL;
