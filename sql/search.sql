-- Named queries used by search, recall and supersession (cwa/retrieve/, cwa/store/supersession.py).
-- Scope parameters: :project (a project row id, or NULL for every project) and :sessions (a JSON
-- array of session row ids, or NULL for every session). :visible is a JSON array of message keys
-- that are still in the live context (excluded). :superseded = 1 also admits superseded documents
-- (preflight sees them only to name its reason; explicit search passes 0).

-- name: project_id
SELECT id FROM projects WHERE identity = ?;

-- name: exact_anchor_hits
-- Documents holding an anchor, case-sensitive (:folded = 0; the text found by its :key, then
-- itself: migration 0041) or case-folded (:folded = 1; then :anchor is folded too, and a row whose
-- text is already folded stores no separate folded form). A text's documents come from its
-- postings (`a<text id>`), oldest first; its range from the document's list of anchors (migration
-- 0042: cwa/store/anchor_lists.py reads it; `cwa_anchor_start` here, for the visible filter, read
-- only for a document with a visible message: the key is compared first).
SELECT a.document_row, t.text, a.packed, t.id
FROM anchor_texts AS t
JOIN anchor_postings AS p ON p.anchor_postings MATCH ('a' || t.id)
JOIN anchors AS a ON a.document_row = p.rowid
JOIN documents AS d ON d.id = a.document_row
WHERE (t.key = :key AND t.text = :anchor AND (:folded = 0 OR t.folded IS NULL)
       OR :folded = 1 AND t.folded = :anchor)
  AND (d.state = 'live' OR :superseded = 1 AND d.state = 'superseded')
  AND (:project IS NULL OR d.project_id = :project)
  AND (:sessions IS NULL OR d.session_id IN (SELECT value FROM json_each(:sessions)))
  AND (:visible IS NULL OR NOT EXISTS (
        SELECT 1 FROM messages AS m
        WHERE m.document_row = a.document_row
          AND m.message_key IN (SELECT value FROM json_each(:visible))
          AND cwa_anchor_start(a.packed, t.id) BETWEEN m.start_byte AND m.end_byte - 1))
LIMIT 1000;

-- name: lexical_top
-- Phase 1: the best windows by BM25F (most negative first), straight from FTS5, among those with
-- an id above :low and at most :high (FTS5 seeks to :low in each posting list and stops after
-- :high: the scope's window range, or a newest slice of it), each with its BM25F without the
-- context field (the column weights :title … :body, context 0; bm25() reads the phrase counts
-- once a statement, for both). Ordered by the bm25() call, not by FTS5's `rank` column: FTS5
-- sorts by rank through a statement of its own, which took a third to a half longer for the
-- same rows on the 1M archive (docs/performance.md, "Ranked by the bm25() call").
SELECT rowid, bm25(window_fts, :title, :user, :assistant, :body, :context) AS score,
       bm25(window_fts, :title, :user, :assistant, :body, 0.0)
FROM window_fts
WHERE window_fts MATCH :match AND rowid > :low AND rowid <= :high
ORDER BY score
LIMIT :k;

-- name: lexical_top_known_idf
-- lexical_top with each phrase's window count given (:hits, a JSON array in phrase order):
-- cwa_bm25 (cwa/retrieve/bm25.py) is bm25() without reading the phrases' posting lists to count;
-- with :own 1 the same call keeps each row's score without the context field aside
-- (bm25.own_scores), with 0 it does no such work.
SELECT rowid, cwa_bm25(window_fts, :hits, :own) AS score FROM window_fts
WHERE window_fts MATCH :match AND rowid > :low AND rowid <= :high
ORDER BY score
LIMIT :k;

-- name: newest_window
SELECT coalesce(max(id), 0) FROM windows;

-- name: project_window_span
-- The ids a project's windows lie between (migration 0026); no row: it has none.
SELECT low, high FROM project_window_spans WHERE project_row = ?;

-- name: scope_terms
-- The indexed terms of the newest :windows windows with ids above :low and at most :high.
SELECT coalesce(sum(term_count), 0) FROM (
  SELECT term_count FROM windows WHERE id > :low AND id <= :high ORDER BY id DESC LIMIT :windows
);

-- name: scoped_term_windows
-- The windows holding :term among ids above :low and at most :high, counted up to :cap only.
SELECT count(*) FROM (
  SELECT 1 FROM window_fts WHERE window_fts MATCH :term AND rowid > :low AND rowid <= :high LIMIT :cap
);

-- name: admissible_windows
-- Phase 2 of BM25F and semantic search: which of those windows are live, in scope and not visible
-- (:ids is a JSON array of window ids). Each with a key its document shares with every document
-- of the same text: its text digest, or for a text of one chunk (whose digest is that chunk's
-- hash, migration 0037) the chunk's id, which documents of one text share (chunks are stored
-- once per hash) and which needs no read of the chunk's row and payload.
SELECT w.id, w.document_row, w.ordinal, w.start_byte, w.end_byte, w.first_message,
       w.last_message, lower(hex(w.content_hash)), d.created_at, d.session_id,
       CASE WHEN d.text_digest != x'' THEN lower(hex(d.text_digest))
            ELSE (SELECT 'chunk ' || dc.chunk_id FROM document_chunks AS dc
                  WHERE dc.document_row = d.id AND dc.ordinal = 0) END,
       d.kind
FROM windows AS w
JOIN documents AS d ON d.id = w.document_row
WHERE w.id IN (SELECT value FROM json_each(:ids))
  AND (d.state = 'live' OR :superseded = 1 AND d.state = 'superseded')
  AND (:project IS NULL OR d.project_id = :project)
  AND (:sessions IS NULL OR d.session_id IN (SELECT value FROM json_each(:sessions)))
  AND (:visible IS NULL OR NOT EXISTS (
        SELECT 1 FROM messages AS m
        WHERE m.document_row = w.document_row
          AND m.ordinal BETWEEN w.first_message AND w.last_message
          AND m.message_key IN (SELECT value FROM json_each(:visible))));

-- name: window_spans
-- The given windows' content hashes and spans, to read their text and terms (:ids is a JSON
-- array of window ids); any state.
SELECT w.id, lower(hex(w.content_hash)), w.document_row, w.start_byte, w.end_byte, w.first_message, w.last_message
FROM windows AS w
WHERE w.id IN (SELECT value FROM json_each(:ids));

-- name: phrase_windows
-- Windows containing an FTS5 phrase, for verifying a quoted query verbatim.
SELECT w.id, w.document_row, w.ordinal, w.start_byte, w.end_byte
FROM window_fts
JOIN windows AS w ON w.id = window_fts.rowid
JOIN documents AS d ON d.id = w.document_row
WHERE window_fts MATCH :match
  AND (d.state = 'live' OR :superseded = 1 AND d.state = 'superseded')
  AND (:project IS NULL OR d.project_id = :project)
  AND (:sessions IS NULL OR d.session_id IN (SELECT value FROM json_each(:sessions)))
LIMIT 500;

-- name: document_count
-- Documents in the archive, for the IDF of exact anchors: rows are never deleted (retention keeps
-- a tombstoned row), so the largest row id is the count, read in O(log n) instead of a scan.
SELECT coalesce(max(id), 0) FROM documents;

-- name: window_count
SELECT value FROM index_stats WHERE name = 'windows';

-- name: term_frequency
SELECT doc FROM window_vocab WHERE term = ?;

-- name: kept_term_counts
-- Common terms' window counts as last counted (migration 0025), and the window count then, for
-- the terms of :terms (a JSON array) that have one.
SELECT t.term, t.windows, t.counted_at_windows
FROM json_each(?) AS j JOIN term_counts AS t ON t.term = j.value;

-- name: keep_term_counts
-- :counts is a JSON array of [term, windows, window count then].
INSERT OR REPLACE INTO term_counts (term, windows, counted_at_windows)
SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(?);

-- name: document_summary
SELECT d.id, d.document_id, d.version, d.kind, strftime('%Y-%m-%dT%H:%M:%fZ', d.created_at / 1000.0, 'unixepoch'), d.state, d.project_id, d.index_generation,
       p.identity, s.session_key, d.session_id, lower(hex((SELECT text_digest FROM document_digests WHERE document_row = d.id))), d.byte_length
FROM documents AS d
JOIN projects AS p ON p.id = d.project_id
JOIN sessions AS s ON s.id = d.session_id
WHERE d.id = ?;

-- name: relation_candidates
-- Messages carrying a structural cue, newest first, in one project (and, with :sessions, one
-- lineage). Driven by documents_project_created so LIMIT stops the scan early; each document's
-- cues are read through the primary key (migration 0040).
SELECT c.document_row, c.ordinal, c.score, m.message_key, m.role,
       m.start_byte, m.text_start, m.end_byte
FROM documents AS d
CROSS JOIN message_cues AS c ON c.document_row = d.id
JOIN messages AS m ON m.document_row = c.document_row AND m.ordinal = c.ordinal
WHERE d.project_id = :project AND d.state = 'live'
  AND c.cue = :cue AND c.score >= :threshold
  AND (:sessions IS NULL OR d.session_id IN (SELECT value FROM json_each(:sessions)))
  AND (:visible IS NULL OR m.message_key NOT IN (SELECT value FROM json_each(:visible)))
ORDER BY d.created_at DESC, d.id DESC, c.ordinal DESC
LIMIT :pool;

-- name: relation_candidates_all
-- The same across every project, driven by documents_created.
SELECT c.document_row, c.ordinal, c.score, m.message_key, m.role,
       m.start_byte, m.text_start, m.end_byte
FROM documents AS d
CROSS JOIN message_cues AS c ON c.document_row = d.id
JOIN messages AS m ON m.document_row = c.document_row AND m.ordinal = c.ordinal
WHERE d.state = 'live'
  AND c.cue = :cue AND c.score >= :threshold
  AND (:visible IS NULL OR m.message_key NOT IN (SELECT value FROM json_each(:visible)))
ORDER BY d.created_at DESC, d.id DESC, c.ordinal DESC
LIMIT :pool;

-- name: latest_generation
SELECT coalesce(max(id), 0) FROM index_generations;

-- name: insert_lease
INSERT INTO leases (id, project_id, created_at, expires_at) VALUES (?, ?, ?, ?);

-- name: insert_lease_document
INSERT INTO lease_documents (lease_id, document_row) VALUES (?, ?);

-- name: lease_expiry
SELECT expires_at FROM leases WHERE id = ?;

-- name: windows_around
SELECT ordinal, start_byte, end_byte FROM windows
WHERE document_row = ? AND ordinal BETWEEN ? AND ? ORDER BY ordinal;

-- name: document_by_version
SELECT id FROM documents
WHERE (substr(identity_digest, 1, 8) = unhex(substr(?1, 5, 16)) OR named_id = ?1) AND document_id = ?1
  AND version = ?2;

-- name: replacement_of
SELECT r.document_id, r.version
FROM supersessions AS x JOIN documents AS r ON r.id = x.replacement_row
WHERE x.superseded_row = ?;

-- name: insert_supersession
INSERT INTO supersessions (superseded_row, replacement_row, created_at) VALUES (?, ?, ?);

-- name: supersession_ancestors
-- Everything a document replaced, directly or through a chain.
WITH RECURSIVE chain (id) AS (
  SELECT superseded_row FROM supersessions WHERE replacement_row = ?
  UNION
  SELECT x.superseded_row FROM supersessions AS x JOIN chain AS c ON x.replacement_row = c.id
)
SELECT id FROM chain;

-- name: chunks_intersecting
SELECT ordinal, start_byte, end_byte FROM document_chunks
WHERE document_row = ?1 AND end_byte > ?2 AND start_byte < ?3 ORDER BY ordinal;

-- name: chunk_toc
SELECT ordinal, start_byte, end_byte FROM document_chunks WHERE document_row = ? ORDER BY ordinal;
