-- A low-weight `context` field for each window: the last terms of the message just before
-- it (in its document, or the last message of the previous conversational document of its
-- session), so a reply is found by the words of the question it answers (cwa/index/lexical.py).
-- FTS5 cannot add a column: the table is recreated empty and the windows are cleared, and the
-- first open after this migration rebuilds the derived indexes (migration 0007's marker,
-- cwa/index/rebuild.py). Embeddings are keyed by window bytes and survive. Context terms carry a
-- mark (U+00B7, cwa/index/terms.py) that is a token character here and never part of a text term,
-- so a term's document frequency stays that of the windows' own text.
DROP TABLE window_vocab;
DROP TABLE window_fts;
CREATE VIRTUAL TABLE window_fts USING fts5 (
  title, user, assistant, body, context,
  content = '',
  contentless_delete = 1,
  tokenize = "unicode61 remove_diacritics 0 tokenchars '_·'"
);
CREATE VIRTUAL TABLE window_vocab USING fts5vocab (window_fts, 'row');
DELETE FROM windows;
UPDATE index_stats SET value = 0 WHERE name = 'windows';
INSERT OR REPLACE INTO meta (key, value) SELECT 'index_backfill', 'needed'
WHERE EXISTS (SELECT 1 FROM documents WHERE state IN ('live', 'superseded'));
