-- Digests stored as their 32 bytes instead of 64 hexadecimal characters: a document's text and
-- identity digests, a chunk's hash, a window's content hash (and the embedding tables keyed by
-- it). Each is a key of a unique or plain index too, so every digest was stored twice at double
-- its size: about 0.5 × the text on coding sessions, more on short chat turns. Every reader that
-- shows a digest (`get`, the views, doctor) renders it as lowercase hex, as before.
--
-- The columns keep their declared TEXT type (changing it means rebuilding `documents`, which most
-- tables reference); TEXT affinity stores a BLOB as it is. A value that is not 64 hex characters
-- stays as it was: an orphaned checkpoint part's released identity ('orphan:' and its hex).
-- One transaction, like every migration: a killed process leaves the archive at schema 19 and the
-- next open converts it again from the start. The freed space is reused by later documents; the
-- file shrinks with `cwa maintain --vacuum`.
UPDATE documents SET text_digest = coalesce(unhex(text_digest), text_digest),
                     identity_digest = coalesce(unhex(identity_digest), identity_digest);
UPDATE chunks SET hash = coalesce(unhex(hash), hash);

-- A plain index is rebuilt after the conversion rather than updated row by row (denser pages).
DROP INDEX windows_content;
UPDATE windows SET content_hash = coalesce(unhex(content_hash), content_hash);
CREATE INDEX windows_content ON windows (content_hash);

UPDATE window_embeddings SET content_hash = coalesce(unhex(content_hash), content_hash);

DROP INDEX embedding_queue_order;
UPDATE embedding_queue SET content_hash = coalesce(unhex(content_hash), content_hash);
CREATE INDEX embedding_queue_order ON embedding_queue (enqueued_at);
