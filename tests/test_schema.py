"""The archive file: permissions, migrations, views, pragmas, and refusing newer schemas."""

from __future__ import annotations

import re
import stat

import apsw
import blake3
import pytest
from conftest import REPO, turn

from cwa.api import Archive
from cwa.errors import ArchiveIncompatible, StorageUnavailable
from cwa.store import migrations
from cwa.store.connection import default_archive_path, open_connection
from cwa_eval.perf.bench import CountingVFS


def test_fresh_file_is_0600_in_a_0700_directory(tmp_path):
    db = tmp_path / "new" / "nested" / "archive.db"
    with Archive.open(db) as archive:
        archive.admit(turn())
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    for side in ("-wal", "-shm"):
        side_file = db.with_name(db.name + side)
        if side_file.exists():
            assert stat.S_IMODE(side_file.stat().st_mode) == 0o600


def test_newer_schema_archive_is_refused_without_modification(tmp_path):
    db = tmp_path / "archive.db"
    with Archive.open(db) as archive:
        archive.admit(turn())
    raw = apsw.Connection(str(db))
    raw.execute(f"PRAGMA user_version = {migrations.latest_version() + 1}")
    raw.execute("PRAGMA journal_mode = DELETE")
    raw.close()
    before = blake3.blake3(db.read_bytes()).hexdigest()
    mtime = db.stat().st_mtime_ns

    with pytest.raises(ArchiveIncompatible) as caught:
        Archive.open(db)
    assert "newer" in caught.value.message
    assert caught.value.details["schemaVersion"] == migrations.latest_version() + 1
    assert blake3.blake3(db.read_bytes()).hexdigest() == before
    assert db.stat().st_mtime_ns == mtime
    assert not db.with_name(db.name + "-wal").exists()


def test_not_a_database_is_a_typed_error(tmp_path):
    db = tmp_path / "notes.txt"
    db.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ArchiveIncompatible):
        Archive.open(db)
    assert db.read_bytes() == b"this is not sqlite" * 100


def test_directory_in_place_of_the_file_is_a_typed_error(tmp_path):
    with pytest.raises(StorageUnavailable):
        Archive.open(tmp_path)


def test_connection_pragmas_extension_and_migrations(tmp_path):
    conn = open_connection(tmp_path / "a.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental
    assert conn.execute("PRAGMA user_version").fetchone()[0] == migrations.latest_version()
    assert conn.execute("SELECT vec_version()").fetchone()[0].startswith("v")
    secret = conn.execute("SELECT value FROM meta WHERE key = 'locator_secret'").fetchone()[0]
    assert isinstance(secret, bytes) and len(secret) == 32
    conn.close()
    reopened = open_connection(tmp_path / "a.db")  # the secret is created once
    again = reopened.execute("SELECT value FROM meta WHERE key = 'locator_secret'").fetchone()[0]
    assert again == secret


def test_admission_opens_no_temporary_file_for_its_savepoints(tmp_path):
    # Each index handler runs in a savepoint, whose statement journal spilled to a temporary file
    # past 64 KiB (891 files for 2,000 coding documents: eval/perf/admission.py --files); it stays
    # in memory now.
    vfs = CountingVFS()
    try:
        with Archive.open(tmp_path / "a.db") as archive:
            opened = len(vfs.flags)
            for n in range(60):
                words = " ".join(f"module_{n}_{k} raised ValueError in src/pkg/file_{k}.py" for k in range(120))
                archive.admit(turn(f"why does step {n} fail? {words}"))
            subjournals = [f for f in vfs.flags[opened:] if f & apsw.SQLITE_OPEN_SUBJOURNAL]
            archive.call("maintain", {"vacuum": True})  # its copy goes through files, then memory again
            assert archive.conn.execute("PRAGMA temp_store").fetchone()[0] == 2
    finally:
        vfs.unregister()
    assert subjournals == []


def compiled_into(calls: list[tuple]):
    """An authorizer that notes each call (SQLite asks it while compiling a statement) and allows it."""

    def authorize(*args) -> int:
        calls.append(args)
        return apsw.SQLITE_OK

    return authorize


def test_a_cached_statement_joining_tables_with_a_bound_parameter_is_compiled_once(tmp_path):
    # SQLite's planner looked at a bound value in such a statement and compiled it again whenever
    # another value was bound (eval/perf/prepared.py). The authorizer hears every compilation.
    from cwa.store.connection import open_read_only
    from cwa.store.sqlfiles import queries

    with Archive.open(tmp_path / "a.db") as archive:
        for n in range(6):
            archive.admit(turn(f"turn {n} of the session"))
    for conn in (open_connection(tmp_path / "a.db"), open_read_only(tmp_path / "a.db")):
        sql = queries("index")["previous_in_session"]
        compiled: list[tuple] = []
        conn.authorizer = compiled_into(compiled)  # set first: setting it expires every statement
        assert conn.execute(sql, {"row": 2}).fetchall() and compiled  # compiled here, once
        compiled.clear()
        found = [conn.execute(sql, {"row": row}).fetchall()[0][0] for row in range(3, 7)]
        conn.authorizer = None
        assert found == [2, 3, 4, 5] and compiled == []
        conn.close()


def test_a_writer_waits_for_a_held_lock_instead_of_failing(tmp_path):
    import threading

    holder = open_connection(tmp_path / "a.db")
    waiter = open_connection(tmp_path / "a.db")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("CREATE TABLE held (x)")
    released = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
    released.start()
    waiter.execute("CREATE TABLE waited (x)")  # blocks until the holder commits, then succeeds
    released.join()
    assert {r[0] for r in waiter.execute("SELECT name FROM sqlite_schema WHERE name IN ('held', 'waited')")} == {
        "held",
        "waited",
    }


def test_migrations_are_numbered_and_each_table_and_view_is_documented(tmp_path):
    found = migrations.available()
    assert [m.number for m in found] == list(range(1, len(found) + 1))
    schema_doc = (REPO / "docs" / "schema.md").read_text(encoding="utf-8")
    conn = open_connection(tmp_path / "a.db")
    names = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'"
        )
    ]
    conn.close()
    assert {"live_documents", "document_overview"} <= set(names)
    shadow = {
        n for n in names for v in ("window_fts", "anchor_postings", "window_vectors") if n.startswith(v + "_")
    }  # FTS5, vec0 internals
    for name in sorted(set(names) - shadow):
        assert f"`{name}`" in schema_doc, f"docs/schema.md does not describe {name}"


def test_views_show_documents_with_session_project_kind_class_size_and_state(archive):
    archive.admit(turn("visible", createdAt="2026-11-01T00:00:00Z"))
    row = archive.conn.execute(
        "SELECT project, session_id, kind, retention_class, created_at, byte_length, state FROM live_documents"
    ).fetchone()
    assert row[:5] == ("/work/p", "s1", "turn", "conversation", "2026-11-01T00:00:00.000Z")
    assert row[5] > 0 and row[6] == "live"


def test_default_path_honours_cwa_db(monkeypatch, tmp_path):
    monkeypatch.setenv("CWA_DB", str(tmp_path / "x.db"))
    assert default_archive_path() == tmp_path / "x.db"
    monkeypatch.delenv("CWA_DB")
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_archive_path() == tmp_path / ".local" / "share" / "cwa" / "archive.db"


# Every statement that finds a window, chunk or vector by its content digest, and the index of the
# digest's first 8 bytes it must seek by (migrations 0031, 0032, 0034): a statement that compared
# the whole digest alone would read every row of a table of a million.
CONTENT_SEEKS = {
    ("admission", "chunk_id"): ("chunks_hash_prefix",),
    ("semantic", "window_for_content"): ("windows_content_prefix",),
    ("semantic", "scope_vector"): ("windows_content_prefix",),
    ("semantic", "windows_of_contents"): ("windows_content_prefix",),
    ("semantic", "insert_embedding"): ("window_embeddings_content",),
    ("semantic", "enqueue_document"): ("window_embeddings_content",),
    ("semantic", "scope_document"): ("window_embeddings_content",),
    ("ranking", "window_vectors"): ("window_embeddings_content",),
    ("lifecycle", "embedding_if_unreferenced"): ("window_embeddings_content", "windows_content_prefix"),
    ("lifecycle", "unscope_content"): ("window_embeddings_content", "windows_content_prefix"),
    ("lifecycle", "dequeue_content_if_unreferenced"): ("windows_content_prefix",),
}


@pytest.mark.parametrize(("stem", "name"), sorted(CONTENT_SEEKS))
def test_a_seek_by_content_digest_uses_the_index_of_its_first_8_bytes(tmp_path, stem, name):
    from cwa.store.sqlfiles import queries

    conn = open_connection(tmp_path / "archive.db")
    for statement in (s for s in queries(stem)[name].split(";\n") if s.strip()):
        params = dict.fromkeys(re.findall(r"(?<![:\w]):([A-Za-z_]\w*)", statement))
        plan = " | ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + statement, params))
        for index in CONTENT_SEEKS[stem, name]:
            assert f"USING INDEX {index}" in plan, plan


# Every statement that reads structural cues, which it joins to a document it holds first
# (migration 0040): through the primary key, never a scan of every cue of a type for each document.
CUE_READS = (
    ("search", "relation_candidates"),
    ("search", "relation_candidates_all"),
    ("ranking", "importance_signals"),
)


@pytest.mark.parametrize(("stem", "name"), CUE_READS)
def test_a_document_s_cues_are_read_through_its_primary_key(tmp_path, stem, name):
    from cwa.store.sqlfiles import queries

    conn = open_connection(tmp_path / "archive.db")
    statement = queries(stem)[name]
    params = dict.fromkeys(re.findall(r"(?<![:\w]):([A-Za-z_]\w*)", statement))
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + statement, params)]
    cue_steps = [step for step in plan if step.startswith("SEARCH c ")]
    assert cue_steps == ["SEARCH c USING PRIMARY KEY (document_row=?)"], plan
