"""How long the first open after an upgrade takes: an archive of an earlier schema opened by this cwa.

    python eval/perf/upgrade.py [--documents 10000] [--schema 16] [--deflate] [--json]
    python eval/perf/upgrade.py --archive ARCHIVE [--pages TABLE ...] [--deflate] [--json]

Builds an archive at `--schema` (16 to the latest but one; migrations applied up to it, synthetic
coding sessions admitted as that schema stored them: before 17 the exact anchors one row per
anchor with its text, before 20 every digest as 64 hex characters, before 22 every index outcome
with its handler's name, before 23 every document row with its first and last source keys,
before 24 an anchor row per type of each text, before 26 no project window ranges, before 27 an
outcome row per handler of each document, before 30 times as ISO-8601 text, before 35 anchor
rows keyed by text first, before 37 every document's text digest in its row, before 38 every chunk
stored as its bytes, before 39 every document's id in its row, before 41 the anchor texts found
by their UNIQUE index, before 42 a row per anchor text of a document), then times `open_connection` on it, which
applies the later migrations in the opening process: 0017 moves every anchor text into the
`anchor_texts` dictionary; 0018 renames the vectors (none here) and converts nothing; 0019 adds
the block table; 0020 turns every digest into its 32 bytes; 0021 rebuilds `messages` with one
index of its keys; 0022 rewrites the index outcomes with handler and outcome ids; 0023 drops the
documents' first and last source key columns; 0024 merges each text's anchor rows of a document
into one; 0025 adds the kept term counts; 0026 computes each project's window id range; 0027
keeps each generation's handlers and drops the plain `complete` outcome rows; 0028 copies the
sign-bit rows into full pages; 0035 keys the anchor rows by document and gives each text's
documents postings; 0036 makes `documents` again without its identity digest's UNIQUE index;
0037 leaves a one-chunk document's text digest in its chunk only; 0038 marks the chunks for
the conversion that deflates them later (cwa/store/chunk_packing.py), and deflates none; 0039
makes `documents` again with each id derived from its identity digest (stored only where it is
not); 0040 drops the index of cues by type; 0041 makes `anchor_texts` again with each text's
key instead of the texts' UNIQUE index; 0042 packs each document's anchor rows into one list. With --archive,
it times the first open of an existing
archive (one kept by `cwa eval perf --keep` from an older tree), upgrading it in place. `--pages
NAME` (a table or index, repeatable) also reports its pages in bytes (SQLite's dbstat) and its
rows, before and after. `--deflate` then runs the conversion that deflates the chunks stored before
schema 38 to its end, as maintenance does, and reports its rate and the bytes before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from unittest import mock

import apsw
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa import contract
from cwa.index import exact
from cwa.index.exact import ExactHandler, add_text_ids, anchor_rows, document_anchors
from cwa.index.lexical import LexicalHandler
from cwa.index.structure import StructuralHandler
from cwa.store import admission, anchor_lists, chunk_packing, derived, migrations, sqlfiles
from cwa.store.admission import admit
from cwa.store.connection import BulkWrites, open_connection
from cwa.store.derived import HandlerResult
from cwa.store.sqlfiles import queries
from cwa.store.status import file_pages
from cwa_eval.perf.scale import CORPORA, PROJECTS

ROW_ANCHORS_UNTIL = 17  # schemas before it: each anchor row held its own text
TYPED_ANCHORS_UNTIL = 24  # schemas before it: an anchor row per (type, text) of a document
TEXT_KEYED_ANCHORS_UNTIL = 35  # schemas before it: anchor rows keyed by text first, no postings
HEX_DIGESTS_UNTIL = 20  # schemas before it: digests as 64 hex characters
NAMED_OUTCOMES_UNTIL = 22  # schemas before it: index outcomes spelled out handler and outcome
STORED_SOURCE_KEYS_UNTIL = 23  # schemas before it: documents stored their first and last source keys
PROJECT_SPANS_SINCE = 26  # project_window_spans: the lexical handler widens a project's window range
OUTCOME_EXCEPTIONS_UNTIL = 27  # schemas before it: an outcome row per handler of every document
INTEGER_TIMES_UNTIL = 30  # schemas before it: a document's times as ISO-8601 text
DIGESTS_IN_ROWS_UNTIL = 37  # schemas before it: every document's text digest in its row (tests/test_migrations.py)
PAYLOADS_WHOLE_UNTIL = 38  # schemas before it: every chunk's payload its bytes as they are
STORED_IDS_UNTIL = 39  # schemas before it: every document's id in its row
UNKEYED_TEXTS_UNTIL = 41  # schemas before it: anchor texts found by their UNIQUE index, no key
ANCHOR_ROWS_UNTIL = 42  # schemas before it: a row per (document, text) of anchors, not one list a document
# How schemas 24-41 stored a document's anchors (anchor_rows' rows, each ending in its text's id).
ANCHOR_ROWS_INSERT = (
    "INSERT INTO anchors (document_row, text_id, types, start_byte, end_byte, occurrences) "
    "SELECT :row, j.value ->> 7, j.value ->> 2, j.value ->> 3, j.value ->> 4, j.value ->> 5 FROM json_each(:anchors) AS j"
)
# Today's statements read a document's digest through sql/views.sql's view, which cwa makes on
# open: `digests_view` makes it for admissions on a bare connection.
DIGESTS_VIEW = re.search(
    r"CREATE VIEW document_digests AS.*?;\n",
    (Path(__file__).resolve().parents[2] / "sql" / "views.sql").read_text(encoding="utf-8"),
    re.S,
).group()
DIGEST_COLUMNS = {
    "documents": ("text_digest", "identity_digest"),
    "chunks": ("hash",),
    "windows": ("content_hash",),
    "window_embeddings": ("content_hash",),
    "embedding_queue": ("content_hash",),
}


@contextlib.contextmanager
def digests_view(conn: apsw.Connection) -> Iterator[None]:
    """The view for admissions on a bare connection at an earlier schema; then every digest back
    in its row, as schemas before 37 stored it, and the view dropped (a migration rebuilding a
    table it reads would trip over it)."""
    conn.execute(DIGESTS_VIEW)
    try:
        yield
        conn.execute(
            "UPDATE documents SET text_digest = (SELECT text_digest FROM document_digests "
            "WHERE document_row = documents.id) WHERE text_digest = x''"
        )
    finally:
        conn.execute("DROP VIEW document_digests")


def payloads_whole() -> contextlib.AbstractContextManager:
    """Admission storing each chunk's bytes as they are, as schemas before 38 did."""
    return mock.patch.object(admission, "packed", lambda data: data)


# Today's statements find a document by id through `named_id` or the identity's prefix and store
# `named_id` only where the id is not derived (migration 0039); before it, the row held every id.
DERIVED_ID_INSERT = "nullif(:document_id, 'doc-' || lower(hex(substr(:identity_digest, 1, 10))))"


@contextlib.contextmanager
def ids_stored() -> Iterator[None]:
    """Every named statement as schemas before 39 ran it: `named_id` read and written as
    `document_id`, which admission stores for every document (a lookup's
    `(… OR document_id = ?) AND document_id = ?` means what it did). The rewritten files are
    read instead of sql/ while it lasts (sqlfiles caches them: cleared on both sides)."""
    original = sqlfiles.resource_dir
    with tempfile.TemporaryDirectory() as folder:
        for path in original("sql").glob("*.sql"):
            text = path.read_text(encoding="utf-8")
            if path.stem == "admission":
                assert text.count(DERIVED_ID_INSERT) == 1, "insert_document changed shape"
                text = text.replace(DERIVED_ID_INSERT, ":document_id")
            (Path(folder) / path.name).write_text(text.replace("named_id", "document_id"), encoding="utf-8")
        sqlfiles.queries.cache_clear()
        try:
            with mock.patch.object(
                sqlfiles, "resource_dir", lambda name: Path(folder) if name == "sql" else original(name)
            ):
                yield
        finally:
            sqlfiles.queries.cache_clear()


# The exact handler's lookups before migration 0041 found a text by its UNIQUE index, and its
# rows had no key.
KEYED_LOOKUP = "t.key = j.value ->> 6 AND t.text = j.value ->> 0"


def unkeyed_statements(name: str) -> Mapping[str, str]:
    """The named statements of `name` for schemas before 41: the anchor dictionary's texts found by
    text and stored without a key (tests/test_migrations.py builds old archives with them too)."""
    sql = queries(name)
    if name != "index":
        return sql
    assert sql["find_anchor_texts"].count(KEYED_LOOKUP) == 1, "find_anchor_texts changed shape"
    return {
        **sql,
        "find_anchor_texts": sql["find_anchor_texts"].replace(KEYED_LOOKUP, "t.text = j.value ->> 0"),
        "insert_anchor_texts": "INSERT INTO anchor_texts (text, folded) "
        "SELECT j.value ->> 0, j.value ->> 1 FROM json_each(:anchors) AS j RETURNING text, id",
    }


@contextlib.contextmanager
def admitting_as(conn: apsw.Connection, schema: int) -> Iterator[None]:
    """Admission on a bare connection at `schema` (earlier than the latest) storing rows as that
    schema did: outcomes, source keys, digests, payloads and ids (times: `iso_times` after)."""
    with contextlib.ExitStack() as stack:
        if schema < STORED_IDS_UNTIL:  # first: the others read the statements it rewrites
            stack.enter_context(ids_stored())
        if schema < NAMED_OUTCOMES_UNTIL:
            stack.enter_context(mock.patch.object(derived, "record_outcomes", named_outcomes))
        elif schema < OUTCOME_EXCEPTIONS_UNTIL:
            stack.enter_context(mock.patch.object(derived, "record_outcomes", coded_outcomes))
        if schema < STORED_SOURCE_KEYS_UNTIL:
            stack.enter_context(stored_source_keys(conn))
        stack.enter_context(digests_view(conn))  # schemas before 37: left as they stored digests
        if schema < PAYLOADS_WHOLE_UNTIL:
            stack.enter_context(payloads_whole())
        if schema < UNKEYED_TEXTS_UNTIL:
            stack.enter_context(mock.patch.object(exact, "queries", unkeyed_statements))
        yield


class PerRowAnchors:
    """The exact handler of schemas 2-16: a row per anchor with its text, folded text, type name
    and specificity (tests/test_migrations.py builds old archives with it too)."""

    name = "exact"

    def index(self, conn: apsw.Connection, target) -> HandlerResult:
        anchors, _ = document_anchors(target.document)
        conn.executemany(
            "INSERT INTO anchors (document_row, type, text, folded, specificity, start_byte, end_byte, occurrences)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (target.document_row, a.type, a.text, a.folded if a.folded != a.text else None, a.specificity)
                + (a.start, a.end, n)
                for a, n in anchors
            ],
        )
        return HandlerResult("complete")


class UnspannedLexicalHandler(LexicalHandler):
    """The lexical handler of schemas 2-25: no project window ranges yet (tests/test_migrations.py
    builds old archives with it too): window ids one after another, whatever their project."""

    def first_window_id(self, conn: apsw.Connection, document_row: int, rebuild: bool = False) -> int | None:
        return None

    def widen_span(self, conn: apsw.Connection, document_row: int, first: int, last: int) -> None:
        pass


class TypedAnchorRows:
    """The exact handler of schemas 17-23: a row per (type, text) of a document, its text by id
    into `anchor_texts` and its type by id into `anchor_types` (tests/test_migrations.py builds
    old archives with it too)."""

    name = "exact"

    def index(self, conn: apsw.Connection, target) -> HandlerResult:
        anchors, _ = document_anchors(target.document)
        rows = [(a.text, a.folded if a.folded != a.text else None, a.type, a.start, a.end, n) for a, n in anchors]
        conn.executemany(
            "INSERT INTO anchor_texts (text, folded) VALUES (?, ?) ON CONFLICT (text) DO NOTHING", [r[:2] for r in rows]
        )
        conn.executemany(
            "INSERT INTO anchors (text_id, document_row, type_id, start_byte, end_byte, occurrences) "
            "SELECT t.id, ?, k.id, ?, ?, ? FROM anchor_texts AS t, anchor_types AS k WHERE t.text = ? AND k.name = ?",
            [(target.document_row, start, end, n, text, kind) for text, _, kind, start, end, n in rows],
        )
        return HandlerResult("complete")


class TextKeyedAnchors:
    """The exact handler of schemas 24-34: a row per text of a document, keyed by the text first,
    with no postings (tests/test_migrations.py builds old archives with it too)."""

    name = "exact"

    def index(self, conn: apsw.Connection, target) -> HandlerResult:
        anchors, _ = document_anchors(target.document)
        if anchors:
            rows = anchor_rows(anchors)
            sql = unkeyed_statements("index")
            add_text_ids(conn, sql, rows)
            conn.execute(ANCHOR_ROWS_INSERT, {"anchors": orjson.dumps(rows).decode(), "row": target.document_row})
        return HandlerResult("complete")


class AnchorRowsByDocument:
    """The exact handler of schemas 35-41: a row per text of a document, keyed by the document
    first, and each text's documents in `anchor_postings` (tests/test_migrations.py builds old
    archives with it too)."""

    name = "exact"

    def index(self, conn: apsw.Connection, target) -> HandlerResult:
        anchors, _ = document_anchors(target.document)
        if anchors:
            rows = anchor_rows(anchors)
            sql = exact.queries("index")  # schemas before 41: admitting_as makes it find texts unkeyed
            ids = add_text_ids(conn, sql, rows)
            conn.execute(ANCHOR_ROWS_INSERT, {"anchors": orjson.dumps(rows).decode(), "row": target.document_row})
            postings = {"texts": anchor_lists.posting_tokens(ids), "row": target.document_row}
            conn.execute(sql["insert_anchor_postings"], postings)
        return HandlerResult("complete")


def anchor_count(conn: apsw.Connection) -> int:
    """The (document, text) anchors an archive holds: rows before schema 42, list entries since."""
    if migrations.user_version(conn) < ANCHOR_ROWS_UNTIL:
        return conn.execute("SELECT count(*) FROM anchors").fetchone()[0]
    return sum(len(anchor_lists.unpack(packed)) for (packed,) in conn.execute("SELECT packed FROM anchors"))


def named_outcomes(conn: apsw.Connection, generation_id: int, document_row: int, recorded: list) -> None:
    """Index outcomes as schemas 1-21 recorded them: a row per handler with its name and outcome
    spelled out (cwa.store.derived.record_outcomes in those schemas; tests/test_migrations.py
    builds old archives with it too)."""
    conn.executemany(
        "INSERT INTO index_outcomes (generation_id, document_row, handler, outcome, detail) VALUES (?, ?, ?, ?, ?)",
        [(generation_id, document_row, *outcome) for outcome in recorded],
    )


def coded_outcomes(conn: apsw.Connection, generation_id: int, document_row: int, recorded: list) -> None:
    """Index outcomes as schemas 22-26 recorded them: a row per handler, `complete` included, by
    ids (tests/test_migrations.py builds old archives with it too)."""
    sql = queries("admission")
    rows = {"outcomes": orjson.dumps(recorded).decode(), "row": document_row, "generation": generation_id}
    conn.execute(sql["name_handlers"], rows)
    conn.execute(sql["record_outcomes"], rows)


@contextlib.contextmanager
def stored_source_keys(conn: apsw.Connection) -> Iterator[None]:
    """Admission as schemas 1-22 stored a document: its first and last source keys in its row
    (NOT NULL there). The row is inserted with empty keys and a temporary trigger fills them
    from the messages that follow it (tests/test_migrations.py builds old archives with it too)."""
    statement = queries("admission")["insert_document"]
    old = statement.replace(
        "source_key_count, subject_key", "source_key_count, first_source_key, last_source_key, subject_key"
    )
    old = old.replace(":source_key_count, :subject_key", ":source_key_count, '', '', :subject_key")
    assert old.count("first_source_key") == 1 and old.count("''") == 2, "insert_document changed shape"
    conn.execute(
        "CREATE TEMP TRIGGER source_keys AFTER INSERT ON main.messages BEGIN "
        "UPDATE documents SET first_source_key = CASE WHEN NEW.ordinal = 0 THEN NEW.message_key "
        "ELSE first_source_key END, last_source_key = NEW.message_key WHERE id = NEW.document_row; END"
    )

    def with_old_insert(name: str) -> Mapping[str, str]:
        return {**queries(name), "insert_document": old} if name == "admission" else queries(name)

    try:
        with mock.patch.object(admission, "queries", with_old_insert):
            yield
    finally:
        conn.execute("DROP TRIGGER temp.source_keys")


def hex_digests(conn: apsw.Connection) -> None:
    """Every digest as schemas before 20 stored it: 64 lowercase hex characters (the tables that
    schema has; tests/test_migrations.py builds old archives with it too)."""
    for table, columns in DIGEST_COLUMNS.items():
        if conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = ?", (table,)).fetchone()[0]:
            conn.execute(f"UPDATE {table} SET " + ", ".join(f"{c} = lower(hex({c}))" for c in columns))


# Times a statement of this cwa writes as epoch milliseconds, which a column of schemas before 30
# (TEXT) keeps as the text of a number.
TIME_COLUMNS = {
    "documents": ("created_at", "admitted_at", "state_changed_at", "shown_until"),
    "index_generations": ("started_at", "finished_at"),
    "messages": ("timestamp",),
}


def iso_times(conn: apsw.Connection) -> None:
    """Times as schemas before 30 stored them: canonical ISO-8601 text. An expiry entry is due its
    days after the retention start (schemas 12-29; tests/test_migrations.py builds old archives
    with it too, and schedules schemas 6-11 by creation time after it)."""
    columns = {name for _, name, *_ in conn.execute("SELECT * FROM pragma_table_xinfo('documents')")}
    for table, names in TIME_COLUMNS.items():
        for name in (n for n in names if table != "documents" or n in columns):
            conn.execute(
                f"UPDATE {table} SET {name} = strftime('%Y-%m-%dT%H:%M:%fZ', CAST({name} AS REAL) / 1000.0, "
                f"'unixepoch') WHERE {name} NOT LIKE '%T%'"
            )
    if "retention_start" in columns:
        conn.execute(
            "UPDATE expiry_schedule SET due_at = (SELECT strftime('%Y-%m-%dT%H:%M:%fZ', d.retention_start, "
            "'+' || expiry_schedule.retention_days || ' days') FROM documents AS d WHERE d.id = document_row)"
        )


def old_archive(path: Path, documents: int, schema: int) -> int:
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.enable_load_extension(True)
    import sqlite_vec

    conn.load_extension(sqlite_vec.loadable_path())
    migrations.apply_pending(conn, str(path), target=schema)
    exact = (
        PerRowAnchors()
        if schema < ROW_ANCHORS_UNTIL
        else TypedAnchorRows()
        if schema < TYPED_ANCHORS_UNTIL
        else TextKeyedAnchors()
        if schema < TEXT_KEYED_ANCHORS_UNTIL
        else AnchorRowsByDocument()
        if schema < ANCHOR_ROWS_UNTIL
        else ExactHandler()
    )
    handlers = (
        exact,
        LexicalHandler() if schema >= PROJECT_SPANS_SINCE else UnspannedLexicalHandler(),
        StructuralHandler(),
    )
    source = itertools.islice(CORPORA["coding"](10**9, project=PROJECTS["coding"]), documents)
    with admitting_as(conn, schema), BulkWrites(conn, 0.5) as batch:
        for document in source:
            admit(conn, contract.validate(contract.ADMIT, document), handlers=handlers, now="2026-12-02T00:00:00Z")
            batch.due()
    with conn:
        if schema < HEX_DIGESTS_UNTIL:
            hex_digests(conn)
        if schema < INTEGER_TIMES_UNTIL:
            iso_times(conn)
    anchors = anchor_count(conn)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()
    return anchors


def run(documents: int, schema: int, deflate: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "old.db"
        anchors = old_archive(path, documents, schema)
        found = {"documents": documents, "anchors": anchors, **first_open(path)}
        if deflate:
            found["deflate"] = deflated(path)
        return found


def deflated(path: Path) -> dict:
    """The conversion of the chunks stored before migration 0038 (cwa/store/chunk_packing.py) run
    to its end, as maintenance runs it (its gaps for other writers included): chunks looked at a
    second; the payloads' bytes before and after; the chunks table's pages after it and after a
    VACUUM (the conversion shrinks rows in place; their pages go back to the file system only then)."""
    conn = open_connection(path)
    payloads = "SELECT count(*), sum(byte_length), sum(length(data)) FROM chunks"
    chunks, byte_total, before = conn.execute(payloads).fetchone()
    pages_before = _measured(conn, "chunks")["bytes"]
    started = time.perf_counter()
    looked = chunk_packing.pack_stored(conn, 10**12)
    seconds = time.perf_counter() - started
    after = conn.execute(payloads).fetchone()[2]
    pages_after = _measured(conn, "chunks")["bytes"]
    conn.execute("VACUUM")
    vacuumed = _measured(conn, "chunks")["bytes"]
    conn.close()
    return {
        "chunks": chunks,
        "lookedAt": looked,
        "seconds": round(seconds, 2),
        "chunksPerSecond": round(looked / seconds) if seconds else None,
        "bytes": byte_total,
        "payloadBytesBefore": before,
        "payloadBytesAfter": after,
        "chunkPagesBefore": pages_before,
        "chunkPagesAfter": pages_after,
        "chunkPagesAfterVacuum": vacuumed,
    }


def first_open(path: Path, pages: tuple[str, ...] = ()) -> dict:
    """Time `open_connection` on `path`, which applies its pending migrations in place; the
    `pages` tables and indexes measured before and after."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    schema = migrations.user_version(conn)
    before = {name: _measured(conn, name) for name in pages}
    file_before, _ = file_pages(conn)
    conn.close()
    started = time.perf_counter()
    conn = open_connection(path)
    seconds = time.perf_counter() - started
    found = {
        "anchorsAfter": anchor_count(conn),
        "anchorTexts": conn.execute("SELECT count(*) FROM anchor_texts").fetchone()[0],
        "schemaFrom": schema,
        "schemaTo": migrations.user_version(conn),
        "openSeconds": round(seconds, 2),
    }
    found["fileBytesBefore"] = file_before
    found["fileBytesAfter"], found["freeBytesAfter"] = file_pages(conn)
    if pages:
        found["pages"] = {name: {"before": before[name], "after": _measured(conn, name)} for name in pages}
    conn.close()
    return found


def _measured(conn: apsw.Connection, name: str) -> dict:
    """A table's or index's bytes of pages and its rows (an index's entries: every cell of an
    index b-tree, interior or leaf, is one, so a partial index counts only what it holds)."""
    size, cells = conn.execute(
        "SELECT coalesce(sum(pgsize), 0), coalesce(sum(ncell), 0) FROM dbstat WHERE name = ?", (name,)
    ).fetchone()
    kind = conn.execute("SELECT type FROM sqlite_schema WHERE name = ?", (name,)).fetchone()
    if kind is None:
        return {"bytes": size, "rows": None}
    rows = cells if kind[0] == "index" else conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
    return {"bytes": size, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--schema", type=int, default=16, help="the schema the archive is built at (16 or later)")
    parser.add_argument(
        "--archive", type=Path, help="time the first open of this existing archive instead (upgraded in place)"
    )
    parser.add_argument(
        "--pages", action="append", default=[], metavar="NAME", help="with --archive: a table's or index's pages"
    )
    parser.add_argument(
        "--deflate", action="store_true", help="then run the deflating of the chunks stored before schema 38, timed"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.archive is None and not 16 <= args.schema < migrations.latest_version():
        parser.error(f"--schema must be 16 to {migrations.latest_version() - 1}")
    if args.archive:
        found = first_open(args.archive, tuple(args.pages))
        if args.deflate:
            found["deflate"] = deflated(args.archive)
    else:
        found = run(args.documents, args.schema, args.deflate)
    if args.json:
        print(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())
        return
    built = (
        f"{found['documents']:,} coding documents, {found['anchors']:,} anchor rows; "
        if "documents" in found
        else f"{args.archive}: "
    )
    print(
        f"{built}{found['anchorsAfter']:,} anchor rows after ({found['anchorTexts']:,} distinct texts): "
        f"schema {found['schemaFrom']} -> {found['schemaTo']} at the first open in {found['openSeconds']} s"
    )
    if "fileBytesBefore" in found:
        print(
            f"  file: {found['fileBytesBefore']:,} -> {found['fileBytesAfter']:,} bytes of pages, "
            f"{found['freeBytesAfter']:,} of them free until `cwa maintain`"
        )
    if "deflate" in found:
        d = found["deflate"]
        print(
            f"  deflating: {d['lookedAt']:,} of {d['chunks']:,} chunks in {d['seconds']} s "
            f"({d['chunksPerSecond']:,} a second); payloads {d['payloadBytesBefore']:,} -> {d['payloadBytesAfter']:,} "
            f"bytes ({d['bytes']:,} of text); chunk pages {d['chunkPagesBefore']:,} -> {d['chunkPagesAfter']:,}, "
            f"{d['chunkPagesAfterVacuum']:,} after VACUUM"
        )
    for name, measured in found.get("pages", {}).items():
        before, after = measured["before"], measured["after"]
        print(
            f"  {name}: {before['bytes']:,} -> {after['bytes']:,} bytes of pages, {_rows(before)} -> {_rows(after)} rows"
        )


def _rows(measured: dict) -> str:
    """A table's or index's rows, or `absent` for one the schema does not have (yet, or any more)."""
    return "absent" if measured["rows"] is None else f"{measured['rows']:,}"


if __name__ == "__main__":
    main()
