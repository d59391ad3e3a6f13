-- Windows found by their content through the first 8 bytes of its digest. `windows_content` held
-- each window's whole 32-byte blake3 digest (aliases of one content share its embedding, and the
-- embedder, purge and hybrid search find a content's windows through it): about 45 bytes a window,
-- 0.32 × the text on LoCoMo-shaped turns. Eight bytes tell a million contents apart but for a
-- chance of about 3 in 10^8 that two share a prefix, which costs nothing but one more row read:
-- every statement that seeks by prefix also compares the whole digest (sql/semantic.sql says how).
-- Building the index reads the table once; no row changes.
DROP INDEX windows_content;
CREATE INDEX windows_content_prefix ON windows (substr(content_hash, 1, 8));
