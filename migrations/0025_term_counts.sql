-- A common term's window count, kept in the archive: counting a term through fts5vocab reads
-- its whole posting list (10-20 ms for a term in most of a million windows), and a process kept
-- such counts only in memory, so every new process (a hook, `cwa call`, a restarted serve) paid
-- for each common term again. A count is used while the archive's window count stays within a
-- tenth of `counted_at_windows` (cwa/retrieve/context.py); a purge empties the table (a term a
-- forgotten document held must not outlive it here).
CREATE TABLE term_counts (
  term                TEXT PRIMARY KEY,
  windows             INTEGER NOT NULL,  -- windows holding the term when counted
  counted_at_windows  INTEGER NOT NULL   -- the archive's window count then
) WITHOUT ROWID;
