"""How long the first open after an upgrade takes: an archive of an earlier schema opened by this cwa.

    python eval/perf/upgrade.py [--documents 10000] [--schema 16] [--json]

Builds an archive at `--schema` (16 to the latest but one; migrations applied up to it, synthetic
coding sessions admitted as that schema stored them: before 17 the exact anchors one row per
anchor with its text, before 20 every digest as 64 hex characters, every index outcome with its
handler's name), then times `open_connection`
on it, which applies the later migrations in the opening process: 0017 moves every anchor text
into the `anchor_texts` dictionary; 0018 renames the vectors (none here) and converts nothing;
0019 adds the block table; 0020 turns every digest into its 32 bytes; 0021 rebuilds `messages`
with one index of its keys; 0022 rewrites the index outcomes with handler and outcome ids.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import apsw
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa import contract
from cwa.index.exact import ExactHandler, document_anchors
from cwa.index.lexical import LexicalHandler
from cwa.index.structure import StructuralHandler
from cwa.store import derived, migrations
from cwa.store.admission import admit
from cwa.store.connection import BulkWrites, open_connection
from cwa.store.derived import HandlerResult
from cwa_eval.perf.scale import CORPORA, PROJECTS

ROW_ANCHORS_UNTIL = 17  # schemas before it: each anchor row held its own text
HEX_DIGESTS_UNTIL = 20  # schemas before it: digests as 64 hex characters
DIGEST_COLUMNS = {
    "documents": ("text_digest", "identity_digest"),
    "chunks": ("hash",),
    "windows": ("content_hash",),
    "window_embeddings": ("content_hash",),
    "embedding_queue": ("content_hash",),
}


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


def named_outcomes(conn: apsw.Connection, generation_id: int, document_row: int, recorded: list) -> None:
    """Index outcomes as schemas 1-21 recorded them: a row per handler with its name and outcome
    spelled out (cwa.store.derived.record_outcomes in those schemas; tests/test_migrations.py
    builds old archives with it too)."""
    conn.executemany(
        "INSERT INTO index_outcomes (generation_id, document_row, handler, outcome, detail) VALUES (?, ?, ?, ?, ?)",
        [(generation_id, document_row, *outcome) for outcome in recorded],
    )


def hex_digests(conn: apsw.Connection) -> None:
    """Every digest as schemas before 20 stored it (tests/test_migrations.py does the same)."""
    for table, columns in DIGEST_COLUMNS.items():
        conn.execute(f"UPDATE {table} SET " + ", ".join(f"{c} = lower(hex({c}))" for c in columns))


def old_archive(path: Path, documents: int, schema: int) -> int:
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.enable_load_extension(True)
    import sqlite_vec

    conn.load_extension(sqlite_vec.loadable_path())
    migrations.apply_pending(conn, str(path), target=schema)
    exact = PerRowAnchors() if schema < ROW_ANCHORS_UNTIL else ExactHandler()
    handlers = (exact, LexicalHandler(), StructuralHandler())
    source = itertools.islice(CORPORA["coding"](10**9, project=PROJECTS["coding"]), documents)
    with BulkWrites(conn, 0.5) as batch, mock.patch.object(derived, "record_outcomes", named_outcomes):
        for document in source:
            admit(conn, contract.validate(contract.ADMIT, document), handlers=handlers, now="2026-12-02T00:00:00Z")
            batch.due()
    if schema < HEX_DIGESTS_UNTIL:
        with conn:
            hex_digests(conn)
    anchors = conn.execute("SELECT count(*) FROM anchors").fetchone()[0]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()
    return anchors


def run(documents: int, schema: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "old.db"
        anchors = old_archive(path, documents, schema)
        started = time.perf_counter()
        conn = open_connection(path)
        seconds = time.perf_counter() - started
        texts = conn.execute("SELECT count(*) FROM anchor_texts").fetchone()[0]
        version = migrations.user_version(conn)
        conn.close()
    return {
        "documents": documents,
        "anchors": anchors,
        "anchorTexts": texts,
        "schemaFrom": schema,
        "schemaTo": version,
        "openSeconds": round(seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--schema", type=int, default=16, help="the schema the archive is built at (16 or later)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not 16 <= args.schema < migrations.latest_version():
        parser.error(f"--schema must be 16 to {migrations.latest_version() - 1}")
    found = run(args.documents, args.schema)
    if args.json:
        print(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())
        return
    print(
        f"{found['documents']:,} coding documents, {found['anchors']:,} anchor rows ({found['anchorTexts']:,} "
        f"distinct texts): schema {found['schemaFrom']} -> {found['schemaTo']} at the first open in "
        f"{found['openSeconds']} s"
    )


if __name__ == "__main__":
    main()
