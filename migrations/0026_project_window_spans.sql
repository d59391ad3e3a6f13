-- Each project's window id range. FTS5 matches over the whole archive and search keeps the
-- project's windows afterwards, so a search in one project of many scored every project's
-- matching windows. With the range, FTS5 seeks to the project's first window and stops after its
-- last (`rowid` bounds in sql/search.sql): the work follows the project's share of the archive
-- wherever its windows lie together (a project's history is mostly contiguous in time). The range
-- only ever widens as windows are indexed (sql/index.sql `extend_project_span`); a purge may leave
-- it wider than needed, which costs time, never a result; a rebuild recomputes it.
CREATE TABLE project_window_spans (
  project_row  INTEGER PRIMARY KEY REFERENCES projects (id),
  low          INTEGER NOT NULL,  -- the project's smallest window id
  high         INTEGER NOT NULL   -- and its largest
);

INSERT INTO project_window_spans (project_row, low, high)
SELECT d.project_id, min(w.id), max(w.id)
FROM windows AS w JOIN documents AS d ON d.id = w.document_row
GROUP BY d.project_id;
