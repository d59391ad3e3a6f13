"""How long the first open after an upgrade takes: an archive of schema 16 opened by this cwa.

    python eval/perf/upgrade.py [--documents 10000] [--json]

Builds an archive at schema 16 (migrations applied up to it, synthetic coding sessions admitted
with the exact anchors written as schemas 2-16 wrote them, one row per anchor with its text), then
times `open_connection` on it, which applies the migrations after 16 in the opening process:
0017 moves every anchor text into the `anchor_texts` dictionary; 0018 renames the vectors (none
here) and converts nothing.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path

import apsw
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa import contract
from cwa.index.exact import document_anchors
from cwa.index.lexical import LexicalHandler
from cwa.index.structure import StructuralHandler
from cwa.store import migrations
from cwa.store.admission import admit
from cwa.store.connection import BulkWrites, open_connection
from cwa.store.derived import HandlerResult
from cwa_eval.perf.scale import CORPORA, PROJECTS

BEFORE = 16  # the last schema whose anchor rows held their own text


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


def old_archive(path: Path, documents: int) -> int:
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.enable_load_extension(True)
    import sqlite_vec

    conn.load_extension(sqlite_vec.loadable_path())
    migrations.apply_pending(conn, str(path), target=BEFORE)
    handlers = (PerRowAnchors(), LexicalHandler(), StructuralHandler())
    source = itertools.islice(CORPORA["coding"](10**9, project=PROJECTS["coding"]), documents)
    with BulkWrites(conn, 0.5) as batch:
        for document in source:
            admit(conn, contract.validate(contract.ADMIT, document), handlers=handlers, now="2026-12-02T00:00:00Z")
            batch.due()
    anchors = conn.execute("SELECT count(*) FROM anchors").fetchone()[0]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()
    return anchors


def run(documents: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "old.db"
        anchors = old_archive(path, documents)
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
        "schemaFrom": BEFORE,
        "schemaTo": version,
        "openSeconds": round(seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found = run(args.documents)
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
