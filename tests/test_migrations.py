"""Upgrades tested with data: an archive as each earlier schema left it, with documents in it,
opened by this cwa. Canonical rows come through unchanged, and each backfill an upgrade needs
happens: derived indexes for schema 1, vectors for the windows of schemas 2-3 (which had none and
no queue for them), the retention plan for schemas 1-5."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import apsw
import numpy as np
import pytest
import sqlite_vec
from conftest import REPO, hermetic_env, run_cwa

from cwa import contract
from cwa.api import Archive
from cwa.config import load_settings
from cwa.errors import NotFound
from cwa.index import queue_worker
from cwa.index.exact import SPECIFICITY, TYPE_IDS, ExactHandler
from cwa.index.lexical import LexicalHandler
from cwa.index.semantic import BackgroundEmbedder, SemanticQueueHandler
from cwa.index.structure import StructuralHandler
from cwa.model_variants import active
from cwa.models import embedder
from cwa.store import anchor_keys, anchor_lists, chunk_packing, doctor, migrations, payloads, retention, vector_blocks
from cwa.store.admission import admit
from cwa.store.connection import write_transaction
from cwa.store.derived import HandlerResult
from cwa.store.reads import find_document, window_text
from cwa.store.retention import plan_of
from cwa.store.sqlfiles import queries
from cwa.store.vector_format import convert, convert_batch, quantized
from cwa.timestamps import to_datetime
from cwa.vocabulary import DEFAULT_CLASS_FOR_KIND
from cwa_eval.perf.upgrade import (
    DIGEST_COLUMNS,
    DIGESTS_IN_ROWS_UNTIL,
    PAYLOADS_WHOLE_UNTIL,
    AnchorRowsByDocument,
    PerRowAnchors,
    TextKeyedAnchors,
    TypedAnchorRows,
    UnspannedLexicalHandler,
    admitting_as,
    hex_digests,
    iso_times,
)

NOW = "2026-11-30T12:00:00.000Z"
PROJECT = "/work/upgraded"
LATEST = migrations.latest_version()
VECTOR_BITS_SINCE = 16  # window_vector_bits; before, window_vectors was a vec0 table
ANCHOR_DICTIONARY_SINCE = 17  # anchor_texts; before, each anchor row held its own text
INT8_VECTORS_SINCE = 18  # window_vectors holds int8; before, float32
PACKED_BITS_SINCE = 19  # window_vector_blocks; before, sign bits were only read row by row
BINARY_DIGESTS_SINCE = 20  # digests as 32 bytes; before, 64 hex characters
OUTCOME_CODES_SINCE = 22  # index outcomes name handler and outcome by id; before, by name
SOURCE_KEYS_FROM_MESSAGES_SINCE = 23  # before, documents also stored their first and last source keys
MERGED_ANCHOR_TYPES_SINCE = 24  # one anchor row per (text, document); before, one per type too
PROJECT_SPANS_SINCE = 26  # project_window_spans; before, no project's window range was kept
OUTCOME_EXCEPTIONS_SINCE = 27  # only outcomes other than a plain `complete` are rows; before, every one
COMPACT_VECTOR_BITS_SINCE = 28  # packed sign-bit rows rewritten; before, shrunk in place
EMBEDDING_PIECES_SINCE = 29  # a vector per piece of 256 tokens; before, one per content (its first 256)
INTEGER_TIMES_SINCE = 30  # a document's, generation's and expiry's times as epoch ms; before, ISO text
ANCHOR_POSTINGS_SINCE = 35  # anchor rows keyed by document, texts' documents in anchor_postings
IDENTITY_PREFIX_SINCE = 36  # documents rebuilt without the identity digest's UNIQUE index
ANCHOR_KEYS_SINCE = 41  # anchor_texts found by a key of each text; before, by the texts' UNIQUE index
PACKED_ANCHORS_SINCE = 42  # a document's anchors one packed list; before, a row per (document, text)
# Each project's window range as kept (0026), and as its windows lie.
SPANS = "SELECT project_row, low, high FROM project_window_spans ORDER BY project_row"
TRUE_SPANS = (
    "SELECT d.project_id, min(w.id), max(w.id) FROM windows AS w JOIN documents AS d ON d.id = w.document_row "
    "GROUP BY d.project_id ORDER BY d.project_id"
)
# An anchor row with each of its types' names (since 0024 the types are bits of one row), read
# from the rows `unpacked_anchors` makes of an archive at the latest schema.
ANCHORS_BY_TYPE = (
    "SELECT a.document_row, k.name, t.text, t.folded, a.start_byte, a.end_byte, a.occurrences "
    "FROM anchor_rows AS a JOIN anchor_texts AS t ON t.id = a.text_id JOIN anchor_types AS k ON a.types & (1 << k.id)"
)
ANCHOR_ROWS = (
    "SELECT document_row, text_id, types, start_byte, end_byte, occurrences FROM {} ORDER BY document_row, text_id"
)


def anchor_rows_at(path: Path, version: int) -> list[tuple]:
    """An archive made at `version` (35 to 41: a row per document and text), and its anchor rows."""
    archive_at(path, version)
    conn = apsw.Connection(str(path))
    try:
        return conn.execute(ANCHOR_ROWS.format("anchors")).fetchall()
    finally:
        conn.close()


def unpacked_anchors(conn: apsw.Connection) -> list[tuple]:
    """Since 0042 a document's anchors are one packed list: the rows they were before (document,
    text id, types, range, occurrences), also as the temporary table `anchor_rows`."""
    rows = [
        (document_row, *entry)
        for document_row, packed in conn.execute("SELECT document_row, packed FROM anchors").fetchall()
        for entry in anchor_lists.unpack(packed)
    ]
    conn.execute("DROP TABLE IF EXISTS temp.anchor_rows")
    conn.execute("CREATE TEMP TABLE anchor_rows (document_row, text_id, types, start_byte, end_byte, occurrences)")
    conn.executemany("INSERT INTO temp.anchor_rows VALUES (?, ?, ?, ?, ?, ?)", rows)
    return sorted(rows)


# A document's digest, whether in its row or (since 0037, one chunk) in its chunk.
TEXT_DIGEST = (
    "coalesce(nullif(text_digest, x''), (SELECT c.hash FROM document_chunks AS dc JOIN chunks AS c "
    "ON c.id = dc.chunk_id WHERE dc.document_row = documents.id AND dc.ordinal = 0))"
)


def as_hex(column: str) -> str:
    """A digest column as hex text, whichever way the schema stored it."""
    return f"CASE typeof({column}) WHEN 'blob' THEN lower(hex({column})) ELSE {column} END"


def as_iso(column: str) -> str:
    """A time column as ISO-8601 text, whichever way the schema stored it (epoch ms since 30 for a
    document's times, since 34 for a vector's)."""
    return (
        f"CASE typeof({column}) WHEN 'integer' THEN strftime('%Y-%m-%dT%H:%M:%fZ', {column} / 1000.0, 'unixepoch') "
        f"ELSE {column} END"
    )


class QueueOnlySemanticHandler(SemanticQueueHandler):
    """The semantic handler of schemas 4-15: it only queued contents (no sign bits yet)."""

    def index(self, conn, target):
        conn.execute(queries("semantic")["enqueue_document"], {"row": target.document_row})
        return HandlerResult("complete", None)


class Float32SemanticHandler(SemanticQueueHandler):
    """The semantic handler of schemas 16-17: the sign bits of contents already embedded came
    from the one (float32) vector table."""

    def index(self, conn, target):
        conn.execute(queries("semantic")["enqueue_document"], {"row": target.document_row})
        conn.execute(
            "INSERT OR IGNORE INTO window_vector_bits (project_id, embedding_id, bits)"
            " SELECT DISTINCT d.project_id, e.id, vec_quantize_binary(v.embedding) FROM windows AS w"
            " JOIN documents AS d ON d.id = w.document_row JOIN window_embeddings AS e ON e.content_hash = w.content_hash"
            " JOIN window_vectors AS v ON v.id = e.id WHERE w.document_row = ?",
            (target.document_row,),
        )
        return HandlerResult("complete", None)


class RowBitsSemanticHandler(SemanticQueueHandler):
    """The semantic handler of schema 18: every sign bit in a row (no `packed` column yet)."""

    def index(self, conn, target):
        conn.execute(queries("semantic")["enqueue_document"], {"row": target.document_row})
        today = queries("semantic")["scope_document"]
        assert " AND b.packed = 0" in today  # the one clause schema 18 lacked
        conn.execute(today.replace(" AND b.packed = 0", ""), {"row": target.document_row})
        return HandlerResult("complete", None)


# The schemas each derived-index handler ran on: from when its tables first existed, until
# (excluded) the schema whose handler replaced it.
HANDLERS_BY_SCHEMA = (
    (2, ANCHOR_DICTIONARY_SINCE, PerRowAnchors),
    (ANCHOR_DICTIONARY_SINCE, MERGED_ANCHOR_TYPES_SINCE, TypedAnchorRows),
    (MERGED_ANCHOR_TYPES_SINCE, ANCHOR_POSTINGS_SINCE, TextKeyedAnchors),
    (ANCHOR_POSTINGS_SINCE, PACKED_ANCHORS_SINCE, AnchorRowsByDocument),
    (PACKED_ANCHORS_SINCE, None, ExactHandler),
    (2, PROJECT_SPANS_SINCE, UnspannedLexicalHandler),
    (PROJECT_SPANS_SINCE, None, LexicalHandler),
    (2, None, StructuralHandler),
    (4, VECTOR_BITS_SINCE, QueueOnlySemanticHandler),
    (VECTOR_BITS_SINCE, INT8_VECTORS_SINCE, Float32SemanticHandler),
    (INT8_VECTORS_SINCE, PACKED_BITS_SINCE, RowBitsSemanticHandler),
    (PACKED_BITS_SINCE, None, SemanticQueueHandler),
)
EXPIRY_SINCE = 6  # expiry_schedule: admissions from then on schedule their document
CLOCK_SINCE = 12  # documents.shown_until: schedules count from the retention start, not creation
# How schemas 6-11 scheduled a document: its class's days from its creation time.
CREATION_SCHEDULE = """
INSERT OR REPLACE INTO expiry_schedule (document_row, due_at, retention_days)
SELECT d.id, strftime('%Y-%m-%dT%H:%M:%fZ', d.created_at, '+' || :days || ' days'), :days
FROM documents AS d WHERE d.id = (SELECT id FROM documents WHERE document_id = :id AND version = :version)
"""
CANONICAL = {
    "documents": f"SELECT document_id, version, kind, retention_class, {as_iso('created_at')}, byte_length, "
    f"{as_hex(TEXT_DIGEST)}, {as_hex('identity_digest')}, source_key_count, subject_key FROM documents ORDER BY id",
    "chunks": f"SELECT {as_hex('hash')}, byte_length, data FROM chunks ORDER BY id",
    "document_chunks": "SELECT * FROM document_chunks ORDER BY document_row, ordinal",
    "messages": f"SELECT document_row, ordinal, message_key, role, tool_name, tool_call_id, {as_iso('timestamp')}, "
    "start_byte, text_start, end_byte FROM messages ORDER BY document_row, ordinal",
    "projects": "SELECT identity FROM projects ORDER BY id",
    "sessions": "SELECT project_id, session_key, parent_id FROM sessions ORDER BY id",
}


def sample_requests(version: int) -> list[dict]:
    base = {"project": PROJECT, "sessionId": "old-session", "createdAt": "2026-10-20T09:00:00Z"}
    requests = [
        {
            **base,
            "kind": "turn",
            "messages": [
                {"key": "u1", "role": "user", "text": "Why does src/flaky_upload.py time out with E_UPLOAD_STALL?"},
                {
                    "key": "a1",
                    "role": "assistant",
                    "text": "The multipart upload retries without resetting its stream.",
                },
            ],
        },
        {
            **base,
            "kind": "tool-result",
            "messages": [
                {"key": "t1", "role": "toolResult", "toolName": "bash", "text": "pytest: 3 failed, E_UPLOAD_STALL x3"}
            ],
        },
        {
            **base,
            "kind": "decision",
            "subjectKey": "upload-retries",
            "messages": [
                {"key": "d1", "role": "custom", "text": "Decision: uploads reset the stream before each retry."}
            ],
        },
    ]
    if version >= 2:  # supersessions arrived with schema 2
        requests.append(
            {
                **base,
                "kind": "decision",
                "subjectKey": "upload-retries",
                "createdAt": "2026-10-21T09:00:00Z",
                "supersedes": {"documentId": None, "version": 1},  # filled in below
                "messages": [
                    {
                        "key": "d2",
                        "role": "custom",
                        "text": "Decision: uploads reset the stream and back off exponentially.",
                    }
                ],
            }
        )
    return requests


def raw_connection(path: Path) -> apsw.Connection:
    """A connection to `path` as cwa opens one before its migrations: WAL, foreign keys on,
    sqlite-vec loaded (schema 4 creates a vec0 table)."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    return conn


def archive_at(path: Path, version: int) -> None:
    """An archive at schema `version`, its documents admitted with the handlers of that schema."""
    conn = raw_connection(path)
    stack = contextlib.ExitStack()
    try:
        migrations.apply_pending(conn, str(path), target=version)
        assert migrations.user_version(conn) == version
        handlers = tuple(
            handler()
            for since, until, handler in HANDLERS_BY_SCHEMA
            if since <= version and (until is None or version < until)
        )
        plan = plan_of(load_settings(None, env={})) if version >= EXPIRY_SINCE else None
        decision = None
        stack.enter_context(admitting_as(conn, version))  # rows as that schema stored them
        for request in sample_requests(version):
            if "supersedes" in request:
                request["supersedes"]["documentId"] = decision
            request = contract.validate(contract.ADMIT, request)  # as the api would pass it
            admitted = admit(
                conn,
                request,
                handlers=handlers,
                now="2026-10-21T10:00:00.000Z",
                retention_plan=plan if version >= CLOCK_SINCE else None,
            )
            if version < INTEGER_TIMES_SINCE:
                iso_times(conn)
            days = plan.get(DEFAULT_CLASS_FOR_KIND[request["kind"]]) if plan and version < CLOCK_SINCE else None
            if days:
                conn.execute(
                    CREATION_SCHEDULE, {"id": admitted["documentId"], "version": admitted["version"], "days": days}
                )
                retention.adopt_plan_if_unset(conn, plan)
            if request["kind"] == "decision":
                decision = admitted["documentId"]
        stack.close()  # every digest in its row, the view gone
        if version < BINARY_DIGESTS_SINCE:
            hex_digests(conn)
    finally:
        stack.close()
        conn.close()


def snapshot(path: Path) -> dict[str, list]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {table: conn.execute(query).fetchall() for table, query in CANONICAL.items()}
    finally:
        conn.close()


def test_the_previous_schema_with_its_inspection_views_upgrades_and_gets_them_back(tmp_path):
    # cwa creates sql/views.sql's views on open; a migration that recreates a table they read
    # must not trip over them, and the views must read the new table afterwards.
    path = tmp_path / "old.db"
    archive_at(path, LATEST - 1)
    conn = apsw.Connection(str(path))
    conn.execute((REPO / "sql" / "views.sql").read_text(encoding="utf-8")).fetchall()
    conn.execute("INSERT INTO meta (key, value) VALUES ('views_digest', 'as the previous cwa left it')")
    conn.close()
    with Archive.open(path, clock=lambda: NOW) as archive:
        assert migrations.user_version(archive.conn) == LATEST
        status = archive.conn.execute("SELECT handler, outcome FROM index_status").fetchall()
        assert status and {outcome for _, outcome in status} == {"complete"}
        assert archive.search({"project": PROJECT, "query": "multipart stream"})["results"]


@pytest.mark.parametrize("version", range(1, LATEST))
def test_an_archive_from_each_earlier_schema_upgrades_with_its_rows_and_backfills(tmp_path, version):
    path = tmp_path / "old.db"
    archive_at(path, version)
    before = snapshot(path)
    old = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    if version < SOURCE_KEYS_FROM_MESSAGES_SINCE:
        keys = old.execute("SELECT document_id, version, first_source_key, last_source_key FROM documents").fetchall()
    else:  # read from its messages, as get does
        keys = old.execute(
            "SELECT d.document_id, d.version, f.message_key, la.message_key FROM documents AS d "
            "JOIN messages AS f ON f.document_row = d.id AND f.ordinal = 0 "
            "JOIN messages AS la ON la.document_row = d.id AND la.ordinal = d.source_key_count - 1 ORDER BY d.id"
        ).fetchall()
    old.close()

    with Archive.open(path, clock=lambda: NOW) as archive:
        conn = archive.conn
        assert migrations.user_version(conn) == LATEST
        assert snapshot(path) == before  # canonical rows come through unchanged
        # the first and last source keys each row held, read from its messages since 0023
        assert [(d, v, archive.get({"documentId": d, "version": v})["sourceKeys"]) for d, v, _, _ in keys] == [
            (d, v, {"first": f, "last": la, "count": 2 if d == keys[0][0] else 1}) for d, v, f, la in keys
        ]
        # every document's outcomes, by name, in its generation (since 0022 stored as ids)
        outcomes = archive.get({"documentId": before["documents"][0][0], "version": 1})["indexOutcomes"]
        assert set(outcomes) >= {"exact", "lexical", "structural"} and set(outcomes.values()) == {"complete"}
        status = conn.execute("SELECT DISTINCT handler, outcome FROM index_status").fetchall()
        assert {outcome for _, outcome in status} == {"complete"} and {h for h, _ in status} == set(outcomes)
        for table, columns in DIGEST_COLUMNS.items():  # every digest now its 32 bytes
            for column in columns:
                kinds = conn.execute(f"SELECT DISTINCT typeof({column}), length({column}) FROM {table}").fetchall()
                # (a one-chunk document's text digest is its chunk's since 0037)
                empty = {("blob", 0)} if (table, column) == ("documents", "text_digest") else set()
                assert set(kinds) <= {("blob", 32)} | empty, (table, column, kinds)
        digests = conn.execute("SELECT typeof(text_digest), length(text_digest) FROM document_digests")
        assert set(digests) == {("blob", 32)}

        # Derived indexes: present for every readable document (rebuilt once for schema 1).
        assert conn.execute("SELECT count(*) FROM meta WHERE key = 'index_backfill'").fetchone()[0] == 0
        unindexed = conn.execute(
            "SELECT count(*) FROM documents AS d WHERE d.state IN ('live', 'superseded') AND NOT EXISTS "
            "(SELECT 1 FROM windows AS w WHERE w.document_row = d.id)"
        ).fetchone()[0]
        assert unindexed == 0
        # Each project's window range (0026), from the windows the archive held; search is bounded by it.
        assert conn.execute(SPANS).fetchall() == conn.execute(TRUE_SPANS).fetchall() != []
        found = archive.search({"project": PROJECT, "query": "E_UPLOAD_STALL", "limit": 5})["results"]
        assert {r["kind"] for r in found if r["matchType"].startswith("exact")} == {"turn", "tool-result"}
        keyword = archive.search({"project": PROJECT, "query": "multipart stream", "semanticPolicy": "never"})
        assert keyword["results"][0]["kind"] == "turn"
        latest = archive.search({"project": PROJECT, "relation": "latest-decision"})["results"][0]
        expected_decision = "back off exponentially" if version >= 2 else "before each retry"
        assert expected_decision in archive.get({"documentId": latest["documentId"]})["text"]
        if version >= 2:
            old = find_document(conn, before["documents"][2][0], 1)
            assert old["state"] == "superseded"

        # Embeddings: `cwa serve`'s background worker embeds every window, the old ones included
        # (schemas 1-3 had no vectors and no queue for them).
        BackgroundEmbedder(str(path), lambda: NOW).step(conn)
        contents = conn.execute("SELECT count(DISTINCT content_hash) FROM windows").fetchone()[0]
        assert conn.execute("SELECT count(*) FROM window_embeddings").fetchone()[0] == contents > 0
        assert conn.execute("SELECT count(*) FROM embedding_queue").fetchone()[0] == 0

        # Retention: documents from before the schedule get their entries from the first pass.
        marker = conn.execute("SELECT count(*) FROM meta WHERE key = 'retention_backfill'").fetchone()[0]
        assert marker == (1 if version < EXPIRY_SINCE else 0)
        archive.call("maintain", {})
        scheduled = dict(
            conn.execute(
                "SELECT d.kind, count(*) FROM expiry_schedule AS e JOIN documents AS d ON d.id = e.document_row "
                "GROUP BY d.kind"
            ).fetchall()
        )
        assert scheduled == {"turn": 1, "tool-result": 1}  # decisions are durable: no entry
        # archived a day after it was written: its days count from the archiving (0012; the tool
        # result's entry waits for the lease of the searches above)
        start = conn.execute(
            "SELECT strftime('%Y-%m-%dT%H:%M:%fZ', e.due_at / 1000.0, 'unixepoch', '-' || e.retention_days || ' days') "
            "FROM expiry_schedule AS e JOIN documents AS d ON d.id = e.document_row WHERE d.kind = 'turn'"
        ).fetchone()
        assert start == ("2026-10-21T10:00:00.000Z",)
        assert conn.execute("SELECT count(*) FROM meta WHERE key = 'retention_backfill'").fetchone()[0] == 0

        # The upgraded archive takes new documents, and old input is still recognised.
        again = archive.admit(sample_requests(version)[0])
        assert again["created"] is False and again["documentId"] == before["documents"][0][0]
        assert archive.admit({**sample_requests(version)[0], "sessionId": "new-session"})["created"] is True
        assert conn.execute(SPANS).fetchall() == conn.execute(TRUE_SPANS).fetchall()  # widened by the new windows


def test_the_epoch_log_starts_with_each_sessions_current_epoch(tmp_path):
    path = tmp_path / "old.db"
    archive_at(path, 14)
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA foreign_keys = ON")
    project = conn.execute("SELECT id FROM projects").fetchone()[0]
    for key, epoch, flags in (
        ("rotated", 3, '{"reason": "tokens"}'),
        ("compacted", 2, '{"compactionKey": "k"}'),
        ("new", 1, "{}"),
    ):
        conn.execute("INSERT INTO sessions (project_id, session_key, created_at) VALUES (?, ?, ?)", (project, key, NOW))
        conn.execute(
            "INSERT INTO session_epochs (session_id, epoch, cut_key, flags, updated_at) VALUES (?, ?, ?, ?, ?)",
            (conn.last_insert_rowid(), epoch, f"cut-{key}", flags, NOW),
        )
    conn.close()
    with Archive.open(path, clock=lambda: NOW) as archive:
        logged = archive.conn.execute(
            "SELECT s.session_key, l.epoch, l.cut_key, l.reason FROM session_epoch_log AS l"
            " JOIN sessions AS s ON s.id = l.session_id ORDER BY s.session_key"
        ).fetchall()
    assert logged == [("compacted", 2, "cut-compacted", "compaction"), ("rotated", 3, "cut-rotated", "tokens")]


def test_apply_pending_stops_at_the_target_and_resumes(tmp_path):
    conn = apsw.Connection(str(tmp_path / "a.db"))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    assert migrations.apply_pending(conn, "a.db", target=2) == [1, 2]
    assert migrations.user_version(conn) == 2
    assert migrations.apply_pending(conn, "a.db", target=2) == []
    assert migrations.apply_pending(conn, "a.db") == list(range(3, LATEST + 1))
    conn.close()


def embedded_as_of(path: Path, version: int, store) -> dict:
    """An archive of schema `version` whose queued window contents were embedded with the model,
    each vector written by `store(conn, embedding_id, content_hash, vector)` as that schema did.
    Returns each content's vector."""
    archive_at(path, version)
    model = embedder(active(None))  # the graph this cwa embeds with, so nothing is re-embedded
    conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    sql = queries("semantic")
    stored = {}
    with conn:
        conn.execute("INSERT INTO meta (key, value) VALUES ('embedding_fingerprint', ?)", (model.fingerprint,))
        for (content_hash,) in conn.execute("SELECT content_hash FROM embedding_queue").fetchall():
            vector = model.embed(
                [window_text(conn, *conn.execute(sql["window_for_content"], (content_hash,)).fetchone())]
            )[0]
            # as schemas before 0029 keyed a vector: by content alone
            conn.execute("INSERT INTO window_embeddings (content_hash, embedded_at) VALUES (?, ?)", (content_hash, NOW))
            store(conn, conn.last_insert_rowid(), content_hash, vector)
            conn.execute(sql["dequeue"], (content_hash,))
            stored[content_hash] = vector
    conn.close()
    assert len(stored) >= 3
    return stored


def test_vectors_leave_vec0_whole_and_each_project_gets_the_sign_bits_of_its_contents(tmp_path):
    path = tmp_path / "old.db"

    def in_vec0(conn, row, content_hash, vector):  # as schemas 4-15 stored vectors: a vec0 row each
        conn.execute("INSERT INTO window_vectors (rowid, embedding) VALUES (?, ?)", (row, vector.tobytes()))

    stored = {h: v.tobytes() for h, v in embedded_as_of(path, VECTOR_BITS_SINCE - 1, in_vec0).items()}

    with Archive.open(path, clock=lambda: NOW) as archive:
        conn = archive.conn
        moved = dict(
            conn.execute(
                "SELECT lower(hex(e.content_hash)), v.embedding FROM window_embeddings AS e"
                " JOIN window_vectors_float32 AS v ON v.id = e.id"
            )
        )
        assert moved == stored  # every vector, byte for byte (their int8 conversion comes later)
        pairs = "SELECT DISTINCT d.project_id, e.id FROM windows w JOIN documents d ON d.id = w.document_row JOIN window_embeddings e ON e.content_hash = w.content_hash"
        assert sorted(conn.execute("SELECT project_id, embedding_id FROM window_vector_bits")) == sorted(
            conn.execute(pairs)
        )
        assert conn.execute("SELECT count(*) FROM embedding_queue").fetchone()[0] == 0  # nothing to embed again
        found = archive.search(
            {"project": PROJECT, "query": "the transfer keeps restarting", "semanticPolicy": "always"}
        )
        assert found["semantic"]["used"] is True and any("semantic" in r["modes"] for r in found["results"])


def _most_specific_first(rows: list[tuple]) -> dict[tuple, tuple]:
    """(document, text) → the (type, range, occurrences) of its most specific type's row."""
    first: dict[tuple, tuple] = {}
    for row, kind, text, _, start, end, occurrences in rows:
        held = first.get((row, text))
        if held is None or TYPE_IDS[kind] < TYPE_IDS[held[0]]:
            first[(row, text)] = (kind, start, end, occurrences)
    return first


def test_anchors_move_into_the_dictionary_each_text_once(tmp_path):
    path = tmp_path / "old.db"
    archive_at(path, ANCHOR_DICTIONARY_SINCE - 1)
    conn = apsw.Connection(str(path))
    before = sorted(
        conn.execute("SELECT document_row, type, text, folded, start_byte, end_byte, occurrences FROM anchors")
    )
    conn.close()
    assert len({text for _, _, text, *_ in before}) < len(before)  # some text is in two documents
    with Archive.open(path, clock=lambda: NOW) as archive:
        conn = archive.conn
        unpacked_anchors(conn)
        after = sorted(conn.execute(ANCHORS_BY_TYPE))
        # every (document, type, text) is kept; the range is the most specific type's (0024)
        assert [r[:4] for r in after] == [r[:4] for r in before]
        assert {
            (r, t): tuple(rest)
            for r, t, *rest in conn.execute(
                "SELECT a.document_row, t.text, a.start_byte, a.end_byte, a.occurrences "
                "FROM anchor_rows AS a JOIN anchor_texts AS t ON t.id = a.text_id"
            )
        } == {key: value[1:] for key, value in _most_specific_first(before).items()}
        # the types' names and specificities are the ones the extractor scores with
        assert {n: sp for n, sp in conn.execute("SELECT name, specificity FROM anchor_types")} == SPECIFICITY
        texts = conn.execute("SELECT count(*), count(DISTINCT text) FROM anchor_texts").fetchone()
        assert texts == (len({text for _, _, text, *_ in before}),) * 2
        # case-folded lookup still goes through the folded form
        found = archive.search({"project": PROJECT, "query": "e_upload_stall", "semanticPolicy": "never"})["results"]
        assert {r["kind"] for r in found if r["matchType"].startswith("exact")} == {"turn", "tool-result"}


def test_a_text_s_anchor_rows_of_each_type_become_one_row_with_its_types_as_bits(tmp_path):
    path = tmp_path / "old.db"
    archive_at(path, MERGED_ANCHOR_TYPES_SINCE - 1)
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA foreign_keys = ON")
    # A text found as a symbol first (twice in all) and quoted (more specific) only later: the
    # merged row keeps the quoted occurrence's range and count.
    quoted = {
        "project": PROJECT,
        "sessionId": "types",
        "createdAt": "2026-10-20T09:05:00Z",
        "kind": "turn",
        "messages": [{"key": "q1", "role": "user", "text": 'see retry_policy first, then "retry_policy" again'}],
    }
    handlers = (TypedAnchorRows(), UnspannedLexicalHandler(), StructuralHandler())
    with admitting_as(conn, MERGED_ANCHOR_TYPES_SINCE - 1):
        admit(conn, contract.validate(contract.ADMIT, quoted), handlers=handlers, now="2026-10-21T10:00:00.000Z")
    iso_times(conn)
    before = sorted(
        conn.execute(
            "SELECT a.document_row, k.name, t.text, t.folded, a.start_byte, a.end_byte, a.occurrences FROM anchors AS a "
            "JOIN anchor_texts AS t ON t.id = a.text_id JOIN anchor_types AS k ON k.id = a.type_id"
        )
    )
    conn.close()
    merged = _most_specific_first(before)
    assert len(merged) < len(before)  # some text was found as two types in one document
    spans = {(k, start, n) for _, k, t, _, start, _, n in before if t == "retry_policy"}
    assert {k for k, _, _ in spans} == {"symbol", "quoted"} and len({(s, n) for _, s, n in spans}) == 2
    with Archive.open(path, clock=lambda: NOW) as archive:
        conn = archive.conn
        unpacked_anchors(conn)
        assert sorted(r[:4] for r in conn.execute(ANCHORS_BY_TYPE)) == [r[:4] for r in before]
        rows = conn.execute(
            "SELECT a.document_row, t.text, a.start_byte, a.end_byte, a.occurrences "
            "FROM anchor_rows AS a JOIN anchor_texts AS t ON t.id = a.text_id"
        ).fetchall()
        assert len(rows) == len(merged) and {(r, t): tuple(rest) for r, t, *rest in rows} == {
            key: value[1:] for key, value in merged.items()
        }
        # a new document's rows are written as the migration merged the old ones (same text, so
        # the same types, texts and counts; its byte ranges are its own)
        first = snapshot(path)["documents"][0][0]
        old_row = find_document(conn, first, 1)["row"]
        request = {**sample_requests(MERGED_ANCHOR_TYPES_SINCE)[0], "sessionId": "after-upgrade"}
        new_row = find_document(conn, archive.admit(request)["documentId"], 1)["row"]
        unpacked_anchors(conn)

        def held(row: int) -> list[tuple]:
            return sorted(
                (k, t, f, n)
                for _, k, t, f, _, _, n in conn.execute(ANCHORS_BY_TYPE + " WHERE a.document_row = ?", (row,))
            )

        assert held(new_row) == held(old_row) and held(old_row)
        found = archive.search({"project": PROJECT, "query": "E_UPLOAD_STALL", "semanticPolicy": "never"})["results"]
        assert {r["kind"] for r in found if r["matchType"].startswith("exact")} == {"turn", "tool-result"}


def test_anchor_rows_are_keyed_by_document_and_each_text_s_documents_come_from_postings(tmp_path):
    path = tmp_path / "old.db"
    before = anchor_rows_at(path, ANCHOR_POSTINGS_SINCE - 1)
    held: dict[int, set[int]] = {}
    for document_row, text_id, *_ in before:
        held.setdefault(text_id, set()).add(document_row)
    assert any(len(documents) > 1 for documents in held.values())  # some text is in two documents
    with Archive.open(path, clock=lambda: NOW) as archive:
        conn = archive.conn
        # the same rows (one packed list a document since 0042), without an index of their own
        assert unpacked_anchors(conn) == before
        assert not conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'anchors_document'").fetchone()[0]
        # each text's postings name exactly the documents holding it, each document once
        postings = "SELECT rowid FROM anchor_postings WHERE anchor_postings MATCH ?"
        assert {t: {r for (r,) in conn.execute(postings, (f"a{t}",))} for t in held} == held
        assert conn.execute("SELECT count(*) FROM anchor_postings").fetchone()[0] == len({r for r, *_ in before})
        found = archive.search({"project": PROJECT, "query": "E_UPLOAD_STALL", "semanticPolicy": "never"})["results"]
        assert {r["kind"] for r in found if r["matchType"].startswith("exact")} == {"turn", "tool-result"}
        # a document admitted now is found by a text the migrated ones hold too
        request = {**sample_requests(ANCHOR_POSTINGS_SINCE)[0], "sessionId": "after-upgrade"}
        new_row = find_document(conn, archive.admit(request)["documentId"], 1)["row"]
        unpacked_anchors(conn)
        texts = [t for (t,) in conn.execute("SELECT text_id FROM anchor_rows WHERE document_row = ?", (new_row,))]
        assert texts and all(new_row in {r for (r,) in conn.execute(postings, (f"a{t}",))} for t in texts)
        assert any(held.get(t) for t in texts)


def _unique_indexes(conn: apsw.Connection, table: str) -> set[tuple[str, ...]]:
    return {
        tuple(column for _, _, column in conn.execute(f"PRAGMA index_info({name!r})"))
        for _, name, unique, *_ in conn.execute(f"PRAGMA index_list({table})")
        if unique
    }


def test_documents_are_rebuilt_without_the_identity_digest_s_unique_index_and_admitted_once(tmp_path):
    path = tmp_path / "old.db"
    archive_at(path, IDENTITY_PREFIX_SINCE - 1)
    conn = apsw.Connection(str(path))
    # every column schema 35 has, the text digest wherever it is stored (in the chunk since 0037)
    names = [name for _, name, *_ in conn.execute("PRAGMA table_xinfo(documents)")]
    assert "text_digest" in names
    columns = ", ".join(TEXT_DIGEST if name == "text_digest" else name for name in names)
    columns = f"SELECT {columns} FROM documents ORDER BY id"

    def rows(conn: apsw.Connection) -> list[tuple]:
        return conn.execute(columns).fetchall()

    referring = {  # documents holding anchors: one list each since 0042, rows per text before
        table: f"SELECT count({'DISTINCT document_row' if table == 'anchors' else '*'}) FROM {table} "
        "WHERE document_row IN (SELECT id FROM documents)"
        for table in ("messages", "document_chunks", "windows", "anchors", "expiry_schedule")
    }
    before = rows(conn)
    held = {table: conn.execute(query).fetchone()[0] for table, query in referring.items()}
    assert ("identity_digest",) in _unique_indexes(conn, "documents")
    superseding = conn.execute("SELECT count(*) FROM documents WHERE supersedes_row IS NOT NULL").fetchone()[0]
    conn.close()
    assert superseding  # a document that refers to another: the table's reference to itself
    with Archive.open(path, clock=lambda: NOW) as archive:
        conn = archive.conn
        assert rows(conn) == before  # every column of every row, same ids
        assert {table: conn.execute(query).fetchone()[0] for table, query in referring.items()} == held
        # (document_id, version) unique since 0039 through named_id: tests below
        assert ("identity_digest",) not in _unique_indexes(conn, "documents")
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1  # on again after the rebuild
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        with pytest.raises(apsw.ConstraintError):  # and enforced: a message of no document
            conn.execute(
                "INSERT INTO messages (document_row, ordinal, message_key, role, start_byte, "
                "text_start, end_byte) VALUES (999999, 0, 'k', 'user', 0, 0, 0)"
            )
        # the same request is admitted once: found by the digest's prefix, the whole compared
        plan = "EXPLAIN QUERY PLAN " + queries("admission")["find_by_identity"]
        assert "documents_identity_prefix" in str(conn.execute(plan, {"identity": bytes(32)}).fetchall())
        request = sample_requests(IDENTITY_PREFIX_SINCE)[0]
        count = "SELECT count(*) FROM documents"
        rows = conn.execute(count).fetchone()[0]
        again = archive.admit(request)
        assert again["documentId"] == before[0][1] and conn.execute(count).fetchone()[0] == rows
        other = {**request, "sessionId": "after-upgrade"}
        assert archive.admit(other)["documentId"] != again["documentId"]
        assert conn.execute(count).fetchone()[0] == rows + 1
        assert archive.search({"project": PROJECT, "query": "multipart stream"})["results"]


def test_the_anchor_dictionary_is_rebuilt_found_by_key_with_its_ids_and_texts_kept(tmp_path):
    path = tmp_path / "old.db"
    archive_at(path, ANCHOR_KEYS_SINCE - 1)
    texts = "SELECT id, text, folded FROM anchor_texts ORDER BY id"
    conn = apsw.Connection(str(path))
    before = conn.execute(texts).fetchall()
    anchors = conn.execute(ANCHOR_ROWS.format("anchors")).fetchall()
    assert ("text",) in _unique_indexes(conn, "anchor_texts") and any(folded for _, _, folded in before)
    conn.close()
    with Archive.open(path, clock=lambda: NOW) as archive:
        conn = archive.conn
        assert conn.execute(texts).fetchall() == before  # same ids, texts and folded forms
        assert unpacked_anchors(conn) == anchors
        keys = dict(conn.execute("SELECT text, key FROM anchor_texts"))
        assert keys == {text: anchor_keys.key(text) for _, text, _ in before}
        assert _unique_indexes(conn, "anchor_texts") == set()
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        plan = "EXPLAIN QUERY PLAN " + queries("index")["find_anchor_texts"]
        assert "anchor_texts_key" in str(conn.execute(plan, {"anchors": "[]", "row": 1}).fetchall())
        found = archive.search({"project": PROJECT, "query": "E_UPLOAD_STALL", "semanticPolicy": "never"})["results"]
        assert {r["kind"] for r in found if r["matchType"].startswith("exact")} == {"turn", "tool-result"}
        # a document holding the same texts adds none to the dictionary
        request = {**sample_requests(ANCHOR_KEYS_SINCE)[0], "sessionId": "after-upgrade"}
        new_row = find_document(conn, archive.admit(request)["documentId"], 1)["row"]
        held = conn.execute("SELECT count(*) FROM anchors WHERE document_row = ?", (new_row,)).fetchone()[0]  # its list
        assert held and conn.execute("SELECT count(*) FROM anchor_texts").fetchone()[0] == len(before)


def test_each_document_s_anchor_rows_become_one_packed_list_read_the_same(tmp_path):
    path = tmp_path / "old.db"
    before = anchor_rows_at(path, PACKED_ANCHORS_SINCE - 1)
    documents = sorted({row for row, *_ in before})
    assert 1 < len(documents) < len(before)
    with Archive.open(path, clock=lambda: NOW) as archive:
        conn = archive.conn
        assert unpacked_anchors(conn) == before  # every text, its types, range and count
        assert [row for (row,) in conn.execute("SELECT document_row FROM anchors")] == documents  # one row each
        assert conn.execute("PRAGMA index_list(anchors)").fetchall() == []
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        # exact search reads each hit's range from the list, and leaves out a hit whose message
        # is still in the live context (the range, read in SQL)
        query = {"project": PROJECT, "query": "E_UPLOAD_STALL", "semanticPolicy": "never"}
        found = [r for r in archive.search(query)["results"] if r["matchType"].startswith("exact")]
        assert {r["kind"] for r in found} == {"turn", "tool-result"}
        assert all("E_UPLOAD_STALL" in r["snippet"] for r in found)
        hidden = archive.search({**query, "excludeVisibleSourceKeys": ["u1"]})["results"]
        assert {r["kind"] for r in hidden if r["matchType"].startswith("exact")} == {"tool-result"}


def test_a_rebuild_that_fails_leaves_the_table_and_foreign_keys_as_they_were(tmp_path):
    """Migration 0036 runs with foreign keys off: a full disk rolls it back whole and turns them
    on again; the next open rebuilds the table."""
    path = tmp_path / "old.db"
    archive_at(path, IDENTITY_PREFIX_SINCE - 1)
    before = snapshot(path)
    conn = raw_connection(path)
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(apsw.FullError):
        migrations.apply_pending(conn, str(path))
    assert migrations.user_version(conn) == IDENTITY_PREFIX_SINCE - 1
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert ("identity_digest",) in _unique_indexes(conn, "documents")
    assert not conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'documents_by_prefix'").fetchone()[0]
    conn.close()
    assert snapshot(path) == before
    with Archive.open(path, clock=lambda: NOW) as archive:
        assert migrations.user_version(archive.conn) == LATEST
        assert ("identity_digest",) not in _unique_indexes(archive.conn, "documents")
    assert snapshot(path) == before


class GivingUp:
    """A handler that records an outcome other than `complete`, with its detail."""

    name = "giving-up"

    def index(self, conn, target):
        return HandlerResult("skipped", "nothing here for this handler")


CODED_OUTCOMES = (
    "SELECT d.document_id, d.version, o.generation_id, h.name, k.name, o.detail FROM index_outcomes AS o "
    "JOIN documents AS d ON d.id = o.document_row JOIN index_handlers AS h ON h.id = o.handler_id "
    "JOIN index_outcome_kinds AS k ON k.code = o.outcome"
)


def test_plain_complete_outcomes_stop_being_rows_and_every_handler_still_shows(tmp_path):
    path = tmp_path / "old.db"
    archive_at(path, OUTCOME_EXCEPTIONS_SINCE - 1)
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA foreign_keys = ON")
    handlers = (ExactHandler(), LexicalHandler(), StructuralHandler(), GivingUp())
    request = {"project": PROJECT, "sessionId": "outcomes", "createdAt": "2026-10-20T09:05:00Z", "kind": "turn"}
    request["messages"] = [{"key": "o1", "role": "user", "text": "a document one handler gives up on"}]
    with admitting_as(conn, OUTCOME_EXCEPTIONS_SINCE - 1):
        admit(conn, contract.validate(contract.ADMIT, request), handlers=handlers, now="2026-10-21T10:00:00.000Z")
    iso_times(conn)
    before = sorted(conn.execute(CODED_OUTCOMES))
    conn.close()
    assert {r[4] for r in before} == {"complete", "skipped"} and len(before) > 8  # a row per handler of each
    with Archive.open(path, clock=lambda: NOW) as archive:
        conn = archive.conn
        # what each document's generation ran, and how, reads the same through the view
        status = "SELECT document_id, version, generation_id, handler, outcome, detail FROM index_status"
        assert sorted(conn.execute(status)) == before
        assert conn.execute(CODED_OUTCOMES).fetchall() == [
            (*r[:5], "nothing here for this handler") for r in before if r[4] == "skipped"
        ]
        for document_id, version in {r[:2] for r in before}:
            expected = {h: o for d, v, _, h, o, _ in before if (d, v) == (document_id, version)}
            assert archive.get({"documentId": document_id, "version": version})["indexOutcomes"] == expected


def float32_vector_archive(path: Path) -> dict:
    """An archive of schema 17 whose windows were embedded: float32 vectors, as schemas 16-17
    stored them (a plain table, sign bits per project). Returns each content's vector."""

    def plain(conn, row, content_hash, vector):
        conn.execute("INSERT INTO window_vectors (id, embedding) VALUES (?, ?)", (row, vector.tobytes()))
        conn.execute(queries("semantic")["scope_vector"], {"id": row, "vector": vector.tobytes(), "hash": content_hash})

    return embedded_as_of(path, INT8_VECTORS_SINCE - 1, plain)


def test_float32_vectors_are_converted_to_int8_in_resumable_batches_and_found_throughout(tmp_path):
    path = tmp_path / "old.db"
    stored = float32_vector_archive(path)
    vectors = (
        "SELECT lower(hex(e.content_hash)), coalesce(v.embedding, f.embedding) FROM window_embeddings AS e"
        " LEFT JOIN window_vectors AS v ON v.id = e.id LEFT JOIN window_vectors_float32 AS f ON f.id = e.id"
    )
    question = {"project": PROJECT, "query": "the transfer keeps restarting", "semanticPolicy": "always"}

    with Archive.open(path, clock=lambda: NOW) as archive:
        conn = archive.conn
        # opening converts nothing: the upgrade is instant, the conversion comes later
        assert dict(conn.execute(vectors)) == {h: v.tobytes() for h, v in stored.items()}
        assert archive.status()["vectorsToConvert"] == len(stored)
        before = archive.search(question)
        assert before["semantic"]["used"] is True and any("semantic" in r["modes"] for r in before["results"])

        with write_transaction(conn):  # one vector, as a process killed after its first batch left it
            assert convert_batch(conn, limit=1) == 1
        halfway = dict(conn.execute(vectors))
        assert sorted(len(v) for v in halfway.values()) == [384] + [1536] * (len(stored) - 1)
        assert archive.status()["vectorsToConvert"] == len(stored) - 1
        during = archive.search(question)  # both formats read at once
        assert [r["documentId"] for r in during["results"]] == [r["documentId"] for r in before["results"]]

        done = archive.call("maintain", {})
        assert done["vectorsConverted"] == len(stored) - 1
        converted = dict(conn.execute(vectors))
        assert converted == {h: quantized(v) for h, v in stored.items()}  # as a new vector is stored
        for content_hash, vector in stored.items():  # each int8 vector points where its float32 one did
            back = np.frombuffer(converted[content_hash], dtype=np.int8).astype(np.float32)
            assert float(back @ vector / np.linalg.norm(back)) > 0.999
        assert archive.status()["vectorsToConvert"] == 0
        assert archive.call("maintain", {})["vectorsConverted"] == 0
        # with nothing left, the conversion only reads: another writer's lock does not stop it
        writer = apsw.Connection(str(path))
        writer.execute("BEGIN IMMEDIATE")
        try:
            assert convert(conn, 1000) == 0
        finally:
            writer.execute("ROLLBACK")
            writer.close()
        assert conn.execute("SELECT count(*) FROM window_vectors_float32").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM embedding_queue").fetchone()[0] == 0  # nothing to embed again
        after = archive.search(question)
        assert [r["documentId"] for r in after["results"]] == [r["documentId"] for r in before["results"]]


def test_serve_s_embedding_worker_converts_the_float32_vectors(tmp_path):
    path = tmp_path / "old.db"
    stored = float32_vector_archive(path)
    shown = run_cwa(["status"], hermetic_env(tmp_path, path))
    assert shown.returncode == 0 and f"up to {len(stored)} float32 vector(s) still to convert" in shown.stdout.decode()
    with Archive.open(path, clock=lambda: NOW) as archive:
        assert archive.status()["vectorsToConvert"] == len(stored)
        BackgroundEmbedder(str(path), lambda: NOW).step(archive.conn)
        vectors = "SELECT lower(hex(e.content_hash)), v.embedding FROM window_embeddings AS e JOIN window_vectors AS v ON v.id = e.id"
        assert dict(archive.conn.execute(vectors)) == {h: quantized(v) for h, v in stored.items()}
        assert archive.status()["vectorsToConvert"] == 0
    assert "to convert" not in run_cwa(["status"], hermetic_env(tmp_path, path)).stdout.decode()


def test_sign_bits_from_before_blocks_are_packed_by_maintain_and_found_the_same(tmp_path, monkeypatch):
    path = tmp_path / "old.db"

    def as_int8(conn, row, content_hash, vector):  # as schema 18 stored a vector: int8, bits per project
        conn.execute("INSERT INTO window_vectors (id, embedding) VALUES (?, ?)", (row, quantized(vector)))
        conn.execute(queries("semantic")["scope_vector"], {"id": row, "vector": vector.tobytes(), "hash": content_hash})

    embedded_as_of(path, PACKED_BITS_SINCE - 1, as_int8)
    monkeypatch.setattr(vector_blocks, "BLOCK_VECTORS", 2)
    question = {"project": PROJECT, "query": "the transfer keeps restarting", "semanticPolicy": "always"}
    with Archive.open(path, clock=lambda: NOW) as archive:
        conn = archive.conn
        per_project = [n for (n,) in conn.execute("SELECT count(*) FROM window_vector_bits GROUP BY project_id")]
        assert conn.execute("SELECT count(*) FROM window_vector_bits WHERE packed = 0").fetchone()[0] == sum(
            per_project
        )
        before = archive.search(question)
        assert before["semantic"]["used"] is True and any("semantic" in r["modes"] for r in before["results"])
        assert archive.call("maintain", {})["vectorsPacked"] == sum(n // 2 * 2 for n in per_project) > 0
        assert conn.execute("SELECT count(*) FROM window_vector_blocks").fetchone()[0] == sum(
            n // 2 for n in per_project
        )
        after = archive.search(question)
        assert [r["documentId"] for r in after["results"]] == [r["documentId"] for r in before["results"]]
        assert archive.call("maintain", {})["vectorsPacked"] == 0


def _pages(conn, name: str) -> int:
    return conn.execute("SELECT sum(pgsize) FROM dbstat WHERE name = ?", (name,)).fetchone()[0]


def test_packed_sign_bits_shrunk_in_place_are_rewritten_into_full_pages(tmp_path):
    # Schemas 19-27 packed a block by updating its rows to an empty `bits`, which left their pages
    # mostly empty; 0028 copies the table: the same rows, keys and indexes, in a third of the pages.
    path = tmp_path / "old.db"
    archive_at(path, COMPACT_VECTOR_BITS_SINCE - 1)
    conn = apsw.Connection(str(path))
    rows = [(1 + n % 2, n, bytes([n % 251]) * 48) for n in range(1, 6001)]
    with conn:  # sign bits of two projects, then most of them packed as 0019 did
        conn.execute("INSERT OR IGNORE INTO projects (id, identity, created_at) VALUES (2, '/work/second', ?)", (NOW,))
        embedded = [(n, n.to_bytes(32, "big"), NOW) for _, n, _ in rows]
        conn.executemany("INSERT INTO window_embeddings (id, content_hash, embedded_at) VALUES (?, ?, ?)", embedded)
        conn.executemany("INSERT INTO window_vector_bits (project_id, embedding_id, bits) VALUES (?, ?, ?)", rows)
        conn.execute("UPDATE window_vector_bits SET packed = 1, bits = x'' WHERE embedding_id <= 5000")
    stored = "SELECT project_id, embedding_id, bits, packed FROM window_vector_bits ORDER BY 1, 2"
    before, pages_before = conn.execute(stored).fetchall(), _pages(conn, "window_vector_bits")
    conn.close()
    with Archive.open(path, clock=lambda: NOW) as archive:
        conn = archive.conn
        assert conn.execute(stored).fetchall() == before
        assert _pages(conn, "window_vector_bits") * 3 <= pages_before  # 32 pages, 96 before
        unpacked = "SELECT count(*) FROM window_vector_bits INDEXED BY window_vector_bits_unpacked WHERE packed = 0"
        assert conn.execute(unpacked).fetchone()[0] == 1000
        by_embedding = "SELECT project_id FROM window_vector_bits INDEXED BY window_vector_bits_by_embedding WHERE embedding_id = ?"
        assert conn.execute(by_embedding, (4001,)).fetchall() == [(2,)]


def test_vectors_keyed_by_content_become_first_pieces_and_the_archive_keeps_them(tmp_path):
    path = tmp_path / "old.db"

    def as_int8(conn, row, content_hash, vector):  # as schemas 18-28 stored a vector
        conn.execute("INSERT INTO window_vectors (id, embedding) VALUES (?, ?)", (row, quantized(vector)))
        conn.execute(queries("semantic")["scope_vector"], {"id": row, "vector": vector.tobytes(), "hash": content_hash})

    stored = embedded_as_of(path, EMBEDDING_PIECES_SINCE - 1, as_int8)
    files = active(None)
    conn = apsw.Connection(str(path))
    with conn:  # what that cwa recorded: each text cut at its first 256 tokens
        conn.execute("UPDATE meta SET value = ? WHERE key = 'embedding_fingerprint'", (files.earlier_fingerprint,))
    bits = "SELECT project_id, embedding_id, bits, packed FROM window_vector_bits ORDER BY 1, 2"
    embeddings = f"SELECT id, content_hash, {as_iso('embedded_at')} FROM window_embeddings ORDER BY id"
    bits_before, embeddings_before = conn.execute(bits).fetchall(), conn.execute(embeddings).fetchall()
    conn.close()
    question = {"project": PROJECT, "query": "the transfer keeps restarting", "semanticPolicy": "always"}
    with Archive.open(path, clock=lambda: NOW) as archive:
        conn = archive.conn
        assert conn.execute(bits).fetchall() == bits_before
        assert (
            conn.execute(
                f"SELECT id, content_hash, {as_iso('embedded_at')} FROM window_embeddings WHERE piece = 0 ORDER BY id"
            ).fetchall()
            == embeddings_before
        )
        assert conn.execute("SELECT count(*) FROM window_embeddings").fetchone()[0] == len(stored)
        before = archive.search(question)
        assert before["semantic"]["used"] is True  # the earlier recipe's vectors answer before it adopts this one
        done = archive.call("index-embed", {})
        assert done["modelChanged"] is False and done["embedded"] == done["refreshing"] == 0
        assert conn.execute(embeddings).fetchall() == embeddings_before  # short texts: nothing to add
        assert [r["documentId"] for r in archive.search(question)["results"]] == [
            r["documentId"] for r in before["results"]
        ]
        foreign_keys = conn.execute("PRAGMA foreign_key_check").fetchall()
        assert foreign_keys == []


def test_times_become_epoch_milliseconds_and_read_the_same_everywhere(tmp_path):
    # Migration 0030: a document's times, its generation's and its expiry's are stored as integer
    # milliseconds; the views, get, gather and the expiry schedule show the same instants as before.
    path = tmp_path / "old.db"
    archive_at(path, INTEGER_TIMES_SINCE - 1)
    conn = apsw.Connection(str(path))
    with conn:  # milliseconds in every time, so a conversion that loses them shows
        conn.execute("UPDATE documents SET created_at = replace(created_at, '.000Z', '.123Z')")
        conn.execute("UPDATE documents SET admitted_at = replace(admitted_at, '.000Z', '.456Z')")
        conn.execute("UPDATE index_generations SET started_at = replace(started_at, '.000Z', '.007Z')")
        conn.execute("UPDATE expiry_schedule SET due_at = replace(due_at, '.000Z', '.999Z')")
        conn.execute("UPDATE messages SET timestamp = '2026-10-20T08:59:0' || ordinal || '.321Z' WHERE ordinal < 2")
    times = "SELECT created_at, admitted_at, state_changed_at, retention_start FROM documents ORDER BY id"
    stored = conn.execute(times).fetchall()
    generations = conn.execute("SELECT started_at, finished_at FROM index_generations ORDER BY id").fetchall()
    due = conn.execute("SELECT document_row, due_at FROM expiry_schedule ORDER BY document_row").fetchall()
    names = conn.execute("SELECT document_id, version FROM documents ORDER BY id").fetchall()
    stamps = "SELECT document_row, ordinal, timestamp FROM messages ORDER BY document_row, ordinal"
    stamped = conn.execute(stamps).fetchall()
    conn.close()
    assert all(isinstance(t, str) and "T" in t for row in stored for t in row if t is not None)
    assert {row[0][-5:] for row in stored} == {".123Z"} and due[0][1].endswith(".999Z")
    assert any(row[2] for row in stored) and due  # a superseded version; scheduled entries

    as_ms = lambda t: None if t is None else round(to_datetime(t).timestamp() * 1000)  # noqa: E731
    with Archive.open(path, clock=lambda: NOW) as archive:
        conn = archive.conn
        assert conn.execute(times).fetchall() == [tuple(as_ms(t) for t in row) for row in stored]
        generations_now = conn.execute("SELECT started_at, finished_at FROM index_generations ORDER BY id")
        assert generations_now.fetchall()[: len(generations)] == [tuple(map(as_ms, row)) for row in generations]
        expiry = "SELECT document_row, due_at FROM expiry_schedule ORDER BY document_row"
        assert conn.execute(expiry).fetchall() == [(row, as_ms(t)) for row, t in due]
        assert conn.execute(stamps).fetchall() == [(row, n, as_ms(t)) for row, n, t in stamped]
        view = "SELECT timestamp FROM document_messages ORDER BY document_id, version, ordinal"
        assert sorted(conn.execute(view), key=str) == sorted(((t,) for *_, t in stamped), key=str)
        # the views show ISO-8601 as before; session_records also the stored time it seeks by
        shown = conn.execute("SELECT created_at, admitted_at FROM document_overview ORDER BY document_row")
        assert shown.fetchall() == [row[:2] for row in stored]
        records = conn.execute("SELECT document_row, created_at, created_ms FROM session_records").fetchall()
        assert records and all((c, ms) == (stored[r - 1][0], as_ms(stored[r - 1][0])) for r, c, ms in records)
        created = {name: row[0] for name, row in zip(names, stored, strict=True)}
        document = archive.call("get", {"documentId": names[0][0], "version": names[0][1]})
        assert document["createdAt"] == created[names[0]]
        assert [m.get("timestamp") for m in document["messages"]] == [t for row, _, t in stamped if row == 1]
        gathered = archive.call("gather", {"project": PROJECT, "query": "multipart stream"})["items"]
        assert len(gathered) > 1
        assert all(item["createdAt"] == created[item["documentId"], item["version"]] for item in gathered)
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


def test_a_long_migration_reports_which_one_runs_and_for_how_long(tmp_path, monkeypatch):
    # After PROGRESS_AFTER seconds (0 here) a running migration is reported, naming its schema;
    # the archive is upgraded as without a listener.
    monkeypatch.setattr(migrations, "PROGRESS_AFTER", 0.0)
    monkeypatch.setattr(migrations, "PROGRESS_EVERY", 0.0)
    monkeypatch.setattr(migrations, "PROGRESS_STEPS", 100)
    path = tmp_path / "old.db"
    archive_at(path, MERGED_ANCHOR_TYPES_SINCE - 1)
    conn = apsw.Connection(str(path))
    heard: list[str] = []
    try:
        assert migrations.apply_pending(conn, str(path), progress=heard.append) == list(
            range(MERGED_ANCHOR_TYPES_SINCE, LATEST + 1)
        )
        assert migrations.user_version(conn) == LATEST
        assert conn.execute("SELECT count(*) FROM anchors").fetchone()[0] > 0
    finally:
        conn.close()
    assert heard and f"to schema {MERGED_ANCHOR_TYPES_SINCE} (anchor types merged)" in heard[0]
    assert all("if stopped, the next open starts it again" in line for line in heard)


CHUNKS_BY_PREFIX = 32  # chunks (and document_chunks) copied into tables without the digest's UNIQUE index


def test_a_copy_that_fills_the_disk_leaves_the_archive_as_it_was_and_the_next_open_finishes_it(tmp_path):
    """Migration 0032 copies every chunk in one transaction: a full disk (the file not allowed to
    grow) rolls it back whole, a typed error for the caller, and the next open copies again."""
    path = tmp_path / "old.db"
    archive_at(path, CHUNKS_BY_PREFIX - 1)
    before = snapshot(path)
    conn = raw_connection(path)
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")  # as a full disk would: no page more
    with pytest.raises(apsw.FullError):
        migrations.apply_pending(conn, str(path))
    assert migrations.user_version(conn) == CHUNKS_BY_PREFIX - 1
    assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE name LIKE '%unique%'").fetchone()[0] == 0
    conn.close()
    assert snapshot(path) == before
    with Archive.open(path, clock=lambda: NOW) as archive:
        assert migrations.user_version(archive.conn) == LATEST
        assert archive.conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert snapshot(path) == before


def test_a_one_chunk_document_s_digest_moves_to_its_chunk_and_the_others_stay(tmp_path):
    path = tmp_path / "old.db"
    archive_at(path, DIGESTS_IN_ROWS_UNTIL - 1)
    conn = apsw.Connection(str(path))
    long = {"project": PROJECT, "sessionId": "long", "createdAt": "2026-10-20T09:05:00Z", "kind": "tool-result"}
    long["messages"] = [{"key": "l1", "role": "toolResult", "text": "a line of a long build log\n" * 6000}]
    with admitting_as(conn, DIGESTS_IN_ROWS_UNTIL - 1):
        admit(conn, contract.validate(contract.ADMIT, long), handlers=(), now="2026-10-21T10:00:00.000Z")
    chunks = "SELECT d.document_id, count(*) FROM documents AS d JOIN document_chunks AS dc ON dc.document_row = d.id GROUP BY d.id"
    count = dict(conn.execute(chunks))
    before = dict(conn.execute("SELECT document_id, text_digest FROM documents"))
    conn.close()
    assert {n > 1 for n in count.values()} == {True, False}
    assert {len(digest) for digest in before.values()} == {32}  # every digest in its row at 36
    with Archive.open(path, clock=lambda: NOW) as archive:
        stored = dict(archive.conn.execute("SELECT document_id, text_digest FROM documents"))
        assert stored == {d: b"" if count[d] == 1 else digest for d, digest in before.items()}
        for document_id, digest in before.items():
            assert archive.get({"documentId": document_id})["textDigest"] == digest.hex()


def test_chunks_stored_whole_are_deflated_in_resumable_batches_and_read_the_same_throughout(tmp_path):
    """Migration 0038 deflates nothing: the chunks stored before it read as they are, and the
    conversion deflates them a batch a transaction; a batch that does not commit leaves them and
    the mark as they were. Every text reads the same before, during and after, through `get`
    and through the `document_texts` view."""
    path = tmp_path / "old.db"
    archive_at(path, PAYLOADS_WHOLE_UNTIL - 1)
    conn = raw_connection(path)
    long = {"project": PROJECT, "sessionId": "long", "createdAt": "2026-10-20T09:05:00Z", "kind": "tool-result"}
    long["messages"] = [{"key": "l1", "role": "toolResult", "text": "a line of a long build log\n" * 6000}]
    with admitting_as(conn, PAYLOADS_WHOLE_UNTIL - 1):
        admit(conn, contract.validate(contract.ADMIT, long), handlers=(), now="2026-10-21T10:00:00.000Z")
    whole = "SELECT count(*) FROM chunks WHERE length(data) = byte_length"
    chunks, stored_whole = conn.execute(f"SELECT count(*), ({whole}) FROM chunks").fetchone()
    conn.close()
    assert chunks == stored_whole > 3

    def texts(archive) -> tuple[dict, dict]:
        found = archive.conn.execute(
            "SELECT document_id, version, text FROM document_texts WHERE text IS NOT NULL"
        )  # (not purged)
        by_view = {(d, v): text for d, v, text in found}
        by_get = {(d, v): archive.get({"documentId": d, "version": v})["text"] for d, v in by_view}
        return by_get, by_view

    with Archive.open(path, clock=lambda: NOW) as archive:
        conn = archive.conn
        assert conn.execute(whole).fetchone()[0] == chunks  # the upgrade deflates nothing
        whole_payloads = dict(conn.execute("SELECT id, data FROM chunks"))
        assert archive.status()["chunksToPack"] == chunks
        before = texts(archive)
        assert before[0] == before[1] and len(before[0]) > 3

        with pytest.raises(RuntimeError), write_transaction(conn):  # a process killed inside its batch
            chunk_packing.pack_batch(conn, limit=chunks)
            raise RuntimeError("killed")
        assert conn.execute(whole).fetchone()[0] == chunks and archive.status()["chunksToPack"] == chunks
        with write_transaction(conn):  # one batch of two, as a process killed after it left them
            assert chunk_packing.pack_batch(conn, limit=2) == 2
        assert archive.status()["chunksToPack"] == chunks - 2
        assert texts(archive) == before  # payloads of both kinds read at once

        done = archive.call("maintain", {})
        assert done["chunksLookedAt"] == chunks - 2 and not done["more"]
        after = dict(conn.execute("SELECT id, data FROM chunks"))
        assert set(after) <= set(whole_payloads)  # (maintenance also purged what had expired)
        assert after == {row: payloads.packed(whole_payloads[row]) for row in after}  # as new ones are stored
        assert sum(len(data) < len(whole_payloads[row]) for row, data in after.items()) >= 3  # the log's, at least
        now = texts(archive)
        assert now[0] == now[1] and now[0] == {key: text for key, text in before[0].items() if key in now[0]}
        assert doctor.canonical_chunks(conn)["ok"]
        assert archive.status()["chunksToPack"] == 0
        assert conn.execute("SELECT count(*) FROM meta WHERE key LIKE 'pack_chunks_%'").fetchone()[0] == 0
        assert archive.call("maintain", {})["chunksLookedAt"] == 0
        asked = []  # with nothing left, serve's worker is not made to wait for a pause (`stopped`)
        assert chunk_packing.pack_stored(conn, 1000, stopped=lambda: asked.append(True) or False) == 0 and not asked


def test_serve_s_index_worker_deflates_the_chunks_stored_whole(tmp_path):
    path = tmp_path / "old.db"
    archive_at(path, PAYLOADS_WHOLE_UNTIL - 1)
    shown = run_cwa(["status"], hermetic_env(tmp_path, path))
    assert shown.returncode == 0 and "chunk(s) stored before schema 38 still to deflate" in shown.stdout.decode()
    with Archive.open(path, clock=lambda: NOW) as archive:
        whole = dict(archive.conn.execute("SELECT id, data FROM chunks"))
        assert archive.status()["chunksToPack"] == len(whole)
        worker = queue_worker.IndexProcess(str(path)).start()  # the child `cwa serve` runs, in its pauses
        try:
            deadline = time.monotonic() + 60  # generous for a loaded machine
            while archive.status()["chunksToPack"] and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            worker.close()
        assert archive.status()["chunksToPack"] == 0
        stored = dict(archive.conn.execute("SELECT id, data FROM chunks"))
        assert stored == {row: payloads.packed(data) for row, data in whole.items()} != whole
    assert "to deflate" not in run_cwa(["status"], hermetic_env(tmp_path, path)).stdout.decode()


DERIVED_IDS_SINCE = 39  # documents.document_id generated from the identity digest, named_id for the rest
# Every named statement that finds a document by its id, with parameters for its plan.
LOOKUPS_BY_ID = (
    ("reads", "document_version", ("doc-0", None, None)),
    ("reads", "part_text_range", ("doc-0", 1)),
    ("admission", "latest_version_of", ("doc-0",)),
    ("search", "document_by_version", ("doc-0", 1)),
    ("session", "document_in_project", ("doc-0", PROJECT)),
    ("checkpoints", "link_part", {"document_id": "doc-0", "version": 1, "root": 1}),
    ("lifecycle", "named_documents", {"ids": '["doc-0"]', "project": PROJECT}),
    *(
        (
            "session",
            name,
            {"session": 1, "key": "k", "action": "preview", "document": "doc-0", "version": 1}
            | {"text": "", "tokens": 0, "epoch": 0, "now": NOW},
        )
        for name in ("insert_replacement", "update_replacement")
    ),
)


def test_an_id_is_derived_from_the_identity_and_stored_only_where_it_is_not(tmp_path):
    """Migration 0039: every document keeps its id and version; only a later version's id and a
    released orphan's are stored (`named_id`); each lookup by id goes through the identity's
    prefix index and named_id's, and admission afterwards stores an id only where it must."""
    path = tmp_path / "old.db"
    archive_at(path, DERIVED_IDS_SINCE - 1)
    conn = apsw.Connection(str(path))
    # an orphaned checkpoint part whose identity was released, as schema 38 released it
    orphan = conn.execute("SELECT id FROM documents WHERE kind = 'tool-result'").fetchone()[0]
    conn.execute(
        "UPDATE documents SET identity_digest = 'orphan:' || lower(hex(identity_digest)) WHERE id = ?", (orphan,)
    )
    before = conn.execute("SELECT id, document_id, version FROM documents ORDER BY id").fetchall()
    conn.close()
    later = [row for row, _, version in before if version > 1]
    assert later  # the superseding decision: version 2 of its predecessor's id
    with Archive.open(path, clock=lambda: NOW) as archive:
        conn = archive.conn
        assert conn.execute("SELECT id, document_id, version FROM documents ORDER BY id").fetchall() == before
        named = [row for (row,) in conn.execute("SELECT id FROM documents WHERE named_id IS NOT NULL ORDER BY id")]
        assert named == sorted([orphan, *later])
        assert _unique_indexes(conn, "documents") == {("named_id", "version"), ("project_id", "subject_key")}
        for _, document_id, version in before:
            found = archive.get({"documentId": document_id, "version": version})
            assert (found["documentId"], found["version"]) == (document_id, version)
        with pytest.raises(NotFound):
            archive.get({"documentId": "doc-not-hex-at-all"})
        for stem, name, params in LOOKUPS_BY_ID:
            plan = str(conn.execute("EXPLAIN QUERY PLAN " + queries(stem)[name], params).fetchall())
            assert "documents_identity_prefix" in plan and "documents_named" in plan, name

        # a new document's id is not stored; a later version's is
        fresh = archive.admit({**sample_requests(DERIVED_IDS_SINCE)[0], "sessionId": "after-upgrade"})
        stored = "SELECT named_id FROM documents WHERE id = (SELECT max(id) FROM documents)"
        assert conn.execute(stored).fetchone() == (None,)
        latest = archive.get({"documentId": before[later[0] - 1][1]})
        decision = {**sample_requests(DERIVED_IDS_SINCE)[3], "createdAt": "2026-10-22T09:00:00Z"}
        decision["supersedes"] = {"documentId": latest["documentId"], "version": latest["version"]}
        decision["messages"] = [{"key": "d3", "role": "custom", "text": "Decision: uploads retry three times."}]
        third = archive.admit(decision)
        assert (third["documentId"], third["version"]) == (latest["documentId"], 3)
        assert conn.execute(stored).fetchone() == (latest["documentId"],)

        # a released identity keeps its id; the same input again is the next version of that id
        row = conn.execute("SELECT id FROM documents WHERE document_id = ?", (fresh["documentId"],)).fetchone()[0]
        with write_transaction(conn):
            conn.execute(queries("checkpoints")["release_identity"], {"row": row})
        assert conn.execute("SELECT document_id, named_id FROM documents WHERE id = ?", (row,)).fetchone() == (
            fresh["documentId"],
            fresh["documentId"],
        )
        again = archive.admit({**sample_requests(DERIVED_IDS_SINCE)[0], "sessionId": "after-upgrade"})
        assert (again["documentId"], again["version"]) == (fresh["documentId"], 2)
        assert conn.execute(stored).fetchone() == (None,)  # its id is its own identity's
        assert archive.get({"documentId": fresh["documentId"], "version": 1})["documentId"] == fresh["documentId"]
        with pytest.raises(apsw.ConstraintError):  # an id and version name one document
            conn.execute("UPDATE documents SET named_id = ?, version = 3 WHERE id = ?", (latest["documentId"], row))
