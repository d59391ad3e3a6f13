-- A message's structural cues are read through their document only. `message_cues_cue`, the index
-- of (cue, score), found no cue by itself: every statement that reads cues joins them to a document
-- it holds first (a structure search walks the project's documents newest first; the importance
-- prior asks whether a pool document holds a decision). SQLite still preferred the index over the
-- primary key for that join, and read, for each document, every cue of the asked type above the
-- threshold: a `latest-question` search of a 10,000-document project took 15 ms to find its 10
-- newest questions, growing with the archive, where the primary key takes 0.1 ms. The index also
-- held each cue again (about 39 bytes a coding document, 0.07 × its text). Dropping it frees its
-- pages for the next `VACUUM` and changes no row.
DROP INDEX message_cues_cue;
