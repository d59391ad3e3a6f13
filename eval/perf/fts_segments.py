"""What FTS5 pays for writing its pending rows out at each savepoint (cwa/store/derived.py,
`FullTextRows`).

    python eval/perf/fts_segments.py [--rows 100000] [--batch 500] [--rounds 2] [--json]

Inserts the same synthetic rows (60 terms drawn from a Zipf-like vocabulary of 50,000 words, in
the five columns `window_fts` has, with its tokenizer) into a new contentless FTS5 table in
transactions of `--batch` rows, three ways, in turn in one process: `held` (plain inserts, as a
batch writer now writes its held rows), `savepoint` (each row inside a savepoint, as a handler
ran) and `journal` (each row followed by an `INSERT … SELECT` upsert of a small table, as the
lexical handler widens its project's window range: a statement with a statement journal).
Reports seconds, microseconds a row and the segments the index holds at the end.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import apsw
import orjson

WAYS = ("held", "savepoint", "journal")
TABLE = """CREATE VIRTUAL TABLE f USING fts5 (title, user, assistant, body, context, content = '',
contentless_delete = 1, tokenize = "unicode61 remove_diacritics 0 tokenchars '_·'")"""
SPAN = "CREATE TABLE span (project INTEGER PRIMARY KEY, low INTEGER, high INTEGER)"
WIDEN = """INSERT INTO span (project, low, high) SELECT 1, :id, :id WHERE :id > 0
ON CONFLICT (project) DO UPDATE SET high = max(high, excluded.high)"""


def texts(count: int) -> list[tuple[str, ...]]:
    """`count` distinct rows of five columns (body the longest), the same for every way."""
    chooser = random.Random(7)
    vocabulary = [f"w{n}" for n in range(50_000)]
    weights = [1 / (n + 1) for n in range(50_000)]
    rows = []
    for _ in range(count):
        words = chooser.choices(vocabulary, weights, k=60)
        rows.append((" ".join(words[:4]), " ".join(words[4:14]), " ".join(words[14:24]), " ".join(words[24:]), ""))
    return rows


def insert(folder: Path, way: str, rows: list[tuple[str, ...]], total: int, batch: int) -> tuple[float, int]:
    """Seconds to insert `total` rows (cycling through `rows`) the `way`; segments at the end."""
    conn = apsw.Connection(str(folder / f"{way}.db"))
    conn.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL")
    conn.execute(TABLE)
    conn.execute(SPAN)
    began = time.perf_counter()
    for start in range(0, total, batch):
        conn.execute("BEGIN")
        for rowid in range(start + 1, min(total, start + batch) + 1):
            if way == "savepoint":
                conn.execute("SAVEPOINT row")
            conn.execute(
                "INSERT INTO f (rowid, title, user, assistant, body, context) VALUES (?, ?, ?, ?, ?, ?)",
                (rowid, *rows[rowid % len(rows)]),
            )
            if way == "savepoint":
                conn.execute("RELEASE row")
            elif way == "journal":
                conn.execute(WIDEN, {"id": rowid})
        conn.execute("COMMIT")
    seconds = time.perf_counter() - began
    segments = conn.execute("SELECT count(DISTINCT segid) FROM f_idx").fetchone()[0]
    conn.close()
    return seconds, segments


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = texts(2_000)
    seconds: dict[str, list[float]] = {way: [] for way in WAYS}
    segments: dict[str, int] = {}
    for _ in range(args.rounds):
        for way in WAYS:
            with tempfile.TemporaryDirectory() as folder:
                spent, segments[way] = insert(Path(folder), way, rows, args.rows, args.batch)
            seconds[way].append(round(spent, 2))
    report = {
        "rows": args.rows,
        "batch": args.batch,
        "seconds": seconds,
        "microsecondsPerRow": {way: round(statistics.median(s) / args.rows * 1e6, 1) for way, s in seconds.items()},
        "segments": segments,
    }
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    for way in WAYS:
        print(f"{way:10} {report['microsecondsPerRow'][way]:8.1f} µs a row  {segments[way]:5} segments  {seconds[way]}")


if __name__ == "__main__":
    main()
