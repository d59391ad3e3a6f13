-- Chunk payloads deflated (cwa/store/payloads.py) and the conversion of those stored before
-- migration 0038 (cwa/store/chunk_packing.py): the span of ids left is meta's
-- [pack_chunks_from, pack_chunks_below).

-- name: chunks_to_pack
-- At most how many chunks the conversion has yet to look at (the span's width: no scan).
SELECT coalesce((SELECT value FROM meta WHERE key = 'pack_chunks_below')
                - (SELECT value FROM meta WHERE key = 'pack_chunks_from'), 0);

-- name: next_chunks_to_pack
-- The next chunks of the span, in id order, with their payloads.
SELECT id, byte_length, data FROM chunks
WHERE id >= (SELECT value FROM meta WHERE key = 'pack_chunks_from')
  AND id < (SELECT value FROM meta WHERE key = 'pack_chunks_below')
ORDER BY id LIMIT :limit;

-- name: conversion_past
-- The mark moves past the chunks just looked at (:last), or to the span's end when none was left.
UPDATE meta SET value = coalesce(:last + 1, (SELECT value FROM meta WHERE key = 'pack_chunks_below'))
WHERE key = 'pack_chunks_from';

-- name: conversion_done
-- A span looked at to its end leaves no mark.
DELETE FROM meta WHERE key IN ('pack_chunks_from', 'pack_chunks_below')
  AND (SELECT value FROM meta WHERE key = 'pack_chunks_from')
      >= (SELECT value FROM meta WHERE key = 'pack_chunks_below');

-- name: whole_chunks_of
-- A document's chunks stored as their bytes (a queued document's, which admission leaves so).
SELECT c.id, c.data FROM document_chunks AS dc JOIN chunks AS c ON c.id = dc.chunk_id
WHERE dc.document_row = ? AND length(c.data) = c.byte_length;

-- name: store_deflated
-- A chunk's deflated payload (the index queue's and the conversion's), unless another process
-- stored one meanwhile.
UPDATE chunks SET data = :data WHERE id = :id AND length(data) = byte_length;
