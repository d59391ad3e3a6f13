"""A rebuild holds FTS5's merges of deleted rows while it runs and catches them up at its end; a
rebuild that fails leaves them to a maintenance pass (cwa/store/full_text_merges.py)."""

from __future__ import annotations

import time

import apsw
import pytest
from conftest import turn

from cwa.api import Archive
from cwa.index import rebuild
from cwa.store import full_text_merges

TABLES = ("window_fts", "anchor_postings")


def _archive(path, documents: int = 120) -> Archive:
    archive = Archive.open(path)
    for n in range(documents):
        text = f"RetryPolicy {n} in src/shard_{n % 7}/ledger_{n}.py failed with E{n % 11}: the budget {n} words"
        archive.admit(turn(text, session=f"s{n % 5}"))
    return archive


def _delete_merge(conn: apsw.Connection) -> dict[str, int | None]:
    """Each FTS5 table's 'deletemerge' option as stored (None: FTS5's default, never set)."""
    found = {}
    for table in TABLES:
        row = conn.execute(f"SELECT v FROM {table}_config WHERE k = 'deletemerge'").fetchone()
        found[table] = None if row is None else row[0]
    return found


def _merging_owed(conn: apsw.Connection) -> list[str]:
    """The tables in which FTS5's own 'merge', deleted rows' merges allowed, still finds work
    (rolled back: the caller's archive is left as it was)."""
    owed = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        for table in TABLES:
            conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('deletemerge', 10)")
            before = conn.total_changes()
            conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('merge', 100000)")
            if conn.total_changes() - before > 1:
                owed.append(table)
    finally:
        conn.execute("ROLLBACK")
    return owed


def _searches(archive: Archive) -> list[list[str]]:
    queries = ["RetryPolicy 17 budget", "src/shard_3/ledger_31.py", "E7 failed"]
    return [
        [hit["documentId"] for hit in archive.search({"project": "/work/p", "query": q, "limit": 5})["results"]]
        for q in queries
    ]


def test_a_rebuild_holds_deleted_rows_merges_while_it_runs_and_owes_none_after(tmp_path, monkeypatch):
    monkeypatch.setattr(rebuild, "FIRST_BATCH", 4)
    monkeypatch.setattr(rebuild, "MAX_BATCH", 8)  # many transactions, many deletes of old rows
    with _archive(tmp_path / "archive.db") as archive:
        before = _searches(archive)
        watcher = apsw.Connection(str(tmp_path / "archive.db"))  # another process's view
        seen = []

        def progress(done, total):  # after each transaction's commit
            seen.append((_delete_merge(watcher), full_text_merges.held(watcher)))

        result = rebuild.rebuild_indexes(archive.conn, archive.handlers, archive.clock(), progress)
        assert result["documents"] == 120 and len(seen) >= 10
        assert all(merge == {"window_fts": 0, "anchor_postings": 0} for merge, _ in seen)
        assert all(until is not None and until > time.time() for _, until in seen)  # a live lease
        assert _delete_merge(watcher) == {"window_fts": 10, "anchor_postings": 10}
        assert full_text_merges.held(watcher) is None
        assert result["fullTextMergeSteps"] >= 1  # it found merging to do
        assert _merging_owed(archive.conn) == []
        for table in TABLES:
            archive.conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")
        assert _searches(archive) == before
        watcher.close()


def test_merges_a_failed_rebuild_held_are_caught_up_by_maintenance_in_bounded_passes(tmp_path, monkeypatch):
    monkeypatch.setattr(rebuild, "FIRST_BATCH", 4)
    monkeypatch.setattr(rebuild, "MAX_BATCH", 8)
    with _archive(tmp_path / "archive.db") as archive:
        before = _searches(archive)
        calls = []

        def progress(done, total):
            calls.append(done)
            if len(calls) == 12:  # most documents' old rows deleted and written again
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            rebuild.rebuild_indexes(archive.conn, archive.handlers, archive.clock(), progress)
        conn = archive.conn
        assert _delete_merge(conn) == {"window_fts": 0, "anchor_postings": 0}  # still held
        assert full_text_merges.held(conn) == 0  # its lease lapsed: no holder is coming back
        owed = _merging_owed(conn)
        assert owed  # the deleted rows' merges wait
        first = archive.call("maintain", {"limit": 1})
        assert first["fullTextMergeSteps"] == 1 and first["more"] is True
        assert _delete_merge(conn) == {"window_fts": 0, "anchor_postings": 0}
        passes = 1
        while full_text_merges.held(conn) is not None:
            assert archive.call("maintain", {"limit": 1})["fullTextMergeSteps"] <= 1
            passes += 1
            assert passes < 50
        assert _delete_merge(conn) == {"window_fts": 10, "anchor_postings": 10}
        assert _merging_owed(conn) == []
        last = archive.call("maintain", {})
        assert last["fullTextMergeSteps"] == 0 and last["more"] is False
        assert _searches(archive) == before  # the documents not yet rebuilt kept their rows


def test_maintenance_leaves_the_merges_a_live_rebuild_holds(tmp_path):
    with _archive(tmp_path / "archive.db", documents=20) as archive:
        conn = archive.conn
        with conn:
            full_text_merges.hold(conn)  # as a rebuild running in another process does
        result = archive.call("maintain", {})
        assert result["fullTextMergeSteps"] == 0
        assert _delete_merge(conn) == {"window_fts": 0, "anchor_postings": 0}
        assert full_text_merges.held(conn) > time.time()
        with conn:  # the holder's lease runs out (it died without a word)
            conn.execute("UPDATE meta SET value = ? WHERE key = 'full_text_merges_held_until'", (time.time() - 1,))
        result = archive.call("maintain", {})
        assert result["fullTextMergeSteps"] >= 1
        assert _delete_merge(conn) == {"window_fts": 10, "anchor_postings": 10}
        assert full_text_merges.held(conn) is None


def test_a_rebuild_stopped_while_catching_up_leaves_the_rest_to_maintenance(tmp_path, monkeypatch):
    with _archive(tmp_path / "archive.db") as archive:
        step, taken = full_text_merges._merge_step, []

        def stopped(conn, statement, pages):  # the user's Ctrl-C during the first merging step
            taken.append(pages)
            raise KeyboardInterrupt

        monkeypatch.setattr(full_text_merges, "_merge_step", stopped)
        with pytest.raises(KeyboardInterrupt):
            archive.call("index-rebuild", {})
        assert taken and full_text_merges.held(archive.conn) == 0  # lapsed: no holder is coming back
        assert _delete_merge(archive.conn) == {"window_fts": 0, "anchor_postings": 0}
        monkeypatch.setattr(full_text_merges, "_merge_step", step)
        assert archive.call("maintain", {})["fullTextMergeSteps"] >= 1
        assert _delete_merge(archive.conn) == {"window_fts": 10, "anchor_postings": 10}
        assert _merging_owed(archive.conn) == []
