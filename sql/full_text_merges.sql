-- Named queries of cwa/store/full_text_merges.py: FTS5's merges of deleted rows held for a
-- rebuild and caught up after it. FTS5 stores each option in the table's %_config, so it outlives
-- the process; the lease in `meta` says until when (seconds since the epoch) a rebuild holds them.

-- name: set_delete_merge
-- The share of a level's rows (percent) deleted before FTS5 merges it again; 0 holds those merges.
INSERT INTO window_fts (window_fts, rank) VALUES ('deletemerge', :percent);
INSERT INTO anchor_postings (anchor_postings, rank) VALUES ('deletemerge', :percent);

-- name: merge_window_fts
-- Up to :pages leaf pages of merging (FTS5's 'merge'): a level with too many segments, else the
-- level with the largest share of deleted rows past 'deletemerge'. One change: nothing was left.
INSERT INTO window_fts (window_fts, rank) VALUES ('merge', :pages);

-- name: merge_anchor_postings
INSERT INTO anchor_postings (anchor_postings, rank) VALUES ('merge', :pages);

-- name: lease
SELECT value FROM meta WHERE key = 'full_text_merges_held_until';

-- name: set_lease
INSERT OR REPLACE INTO meta (key, value) VALUES ('full_text_merges_held_until', :until);

-- name: end_lease
DELETE FROM meta WHERE key = 'full_text_merges_held_until';
