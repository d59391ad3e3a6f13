-- A chunk's payload (`chunks.data`) is deflated where that is shorter, SQLite's sqlar convention:
-- a payload shorter than `byte_length` is a zlib stream of the bytes, one of that length is the
-- bytes (cwa/store/payloads.py; the sqlite3 shell's sqlar_uncompress(data, byte_length) reads
-- either). This version also tells an older cwa, which would read a stream as the bytes, that the
-- archive is newer. The chunks stored until now stay as they are, readable, and are deflated by
-- the conversion (cwa/store/chunk_packing.py) over the span of ids marked here.
INSERT INTO meta (key, value)
SELECT 'pack_chunks_from', min(id) FROM chunks HAVING count(*) > 0;
INSERT INTO meta (key, value)
SELECT 'pack_chunks_below', max(id) + 1 FROM chunks HAVING count(*) > 0;
