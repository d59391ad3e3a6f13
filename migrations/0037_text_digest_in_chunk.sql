-- A document of one chunk stores x'' as its text digest: its digest is that chunk's hash (the
-- blake3 of the same bytes), kept once (sql/views.sql `document_digests` reads either). This
-- version also tells an older cwa, which would read x'' as the digest, that the archive is newer.
-- Existing rows are converted where the one chunk's hash is the stored digest.
UPDATE documents SET text_digest = x''
WHERE length(text_digest) = 32
  AND (SELECT count(*) FROM document_chunks AS dc WHERE dc.document_row = documents.id) = 1
  AND text_digest = (SELECT c.hash FROM document_chunks AS dc JOIN chunks AS c ON c.id = dc.chunk_id
                     WHERE dc.document_row = documents.id);
