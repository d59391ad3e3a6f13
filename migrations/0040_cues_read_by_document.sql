-- A message's structural cues are read through their document only. `message_cues_cue`, the index
-- of (cue, score), found no cue by itself: every statement that reads cues joins them to a document
-- it holds first (a structure search walks the project's documents newest first; the importance
-- prior asks whether a pool document holds a decision). SQLite still preferred the index over the
-- primary key for that join, and read, for each document, every cue of the asked type above the
-- threshold, a cost growing with the archive (relation search p50 82 → 7 ms at 10K windows, 653 →
-- 6.5 ms at 100K: `python eval/perf/search.py`, docs/performance.md). The index also held each cue
-- again (about 39 bytes a coding document, 0.07 × its text). Dropping it frees its pages for the
-- next `VACUUM` and changes no row.
DROP INDEX message_cues_cue;
