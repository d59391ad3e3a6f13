-- Durable first, indexed soon after (cwa/store/index_queue.py): a document the session engine
-- archives in `cwa serve` commits its exact bytes and this row in one transaction; the serve
-- process's index worker (or any search of its project, or maintenance, or the next process)
-- derives its windows, anchors and cues later and deletes the row in the same transaction.
CREATE TABLE index_queue (
  document_row INTEGER PRIMARY KEY REFERENCES documents (id),
  project_id   INTEGER NOT NULL REFERENCES projects (id),
  queued_at    TEXT NOT NULL
);
CREATE INDEX index_queue_by_project ON index_queue (project_id, document_row);
