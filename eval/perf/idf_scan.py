"""Where a BM25 query's time goes on a large FTS5 index: posting lists, not matches.

    python eval/perf/idf_scan.py [--windows 1000000] [--json]

Builds a bare FTS5 table (default tokenizer) of `--windows` texts of the synthetic coding sessions
(eval/retrieval/sessions.py; messages cycled), then times, for the two commonest words together and
alone and for a rarer word: counting the term's windows through fts5vocab; `MATCH … ORDER BY rank
LIMIT 40` over every window and over the newest 5,000 ids only (`rowid > max − 5000`); and the same
newest range without `rank`. bm25() reads every phrase's whole posting list once per statement to
compute its IDF, so a restricted range still pays for the full lists, while fetching rows of the
range alone is cheap: the gap is the IDF scan.
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

from cwa_eval.retrieval.sessions import synthetic_sessions


def timed(conn: apsw.Connection, sql: str, *args) -> float:
    started = time.perf_counter()
    conn.execute(sql, args).fetchall()
    return round((time.perf_counter() - started) * 1000, 2)


def run(windows: int) -> dict:
    texts = [m["text"] for d in synthetic_sessions(min(windows, 200_000)) for m in d["messages"]]
    with tempfile.TemporaryDirectory() as folder:
        conn = apsw.Connection(str(Path(folder) / "bare.db"))
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(text)")
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")
        with conn:
            conn.executemany(
                "INSERT INTO t (text) VALUES (?)",
                ((text,) for text in itertools.islice(itertools.cycle(texts), windows)),
            )
        newest = conn.execute("SELECT max(rowid) FROM t").fetchone()[0] - 5000
        common = [w for (w,) in conn.execute("SELECT term FROM v WHERE term GLOB '[a-z]*' ORDER BY doc DESC LIMIT 2")]
        rare = conn.execute(
            "SELECT term FROM v WHERE doc BETWEEN ? AND ? LIMIT 1", (windows // 200, windows // 100)
        ).fetchone()[0]
        report: dict = {"windows": windows, "queries": {}}
        for label, words in ((" AND ".join(common), common), (common[0], common[:1]), (rare, [rare])):
            match = " AND ".join(f'"{w}"' for w in words)
            report["queries"][label] = {
                "postings": {w: conn.execute("SELECT doc FROM v WHERE term = ?", (w,)).fetchone()[0] for w in words},
                "vocab_count_ms": round(sum(timed(conn, "SELECT doc FROM v WHERE term = ?", w) for w in words), 2),
                "rank_all_ms": timed(conn, "SELECT rowid, rank FROM t WHERE t MATCH ? ORDER BY rank LIMIT 40", match),
                "rank_newest_ms": timed(
                    conn,
                    "SELECT rowid, rank FROM t WHERE t MATCH ? AND rowid > ? ORDER BY rank LIMIT 40",
                    match,
                    newest,
                ),
                "rows_newest_ms": timed(conn, "SELECT rowid FROM t WHERE t MATCH ? AND rowid > ?", match, newest),
            }
        conn.close()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=1_000_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = run(args.windows)
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    print(f"{report['windows']:,} windows in a bare FTS5 table")
    for label, found in report["queries"].items():
        print(
            f"  {label:<24} postings {found['postings']}: fts5vocab count {found['vocab_count_ms']} ms; "
            f"rank over all {found['rank_all_ms']} ms, over the newest 5,000 ids {found['rank_newest_ms']} ms; "
            f"rows of the newest 5,000 without rank {found['rows_newest_ms']} ms"
        )


if __name__ == "__main__":
    main()
