"""Search and recall latency at a given number of windows, against a bare FTS5 table.

    python eval/perf/search.py --windows 10000 [--windows 100000] [--json]

Builds an archive of synthetic coding sessions (eval/retrieval/sessions.py) until it holds at least the
requested number of windows, then times, in the same process:
- cwa search (exact, lexical and relation queries; each search also grants its lease),
- cwa recall of the returned locators,
- the same lexical queries as plain `MATCH 'w1 OR w2 …' ORDER BY rank LIMIT 10` on a bare FTS5
  table (default tokenizer, content stored) holding the same window texts.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import for_each_size, latency, timed

from cwa.api import Archive
from cwa_eval.retrieval.sessions import ERRORS, MODULES, WORDS, synthetic_sessions, word

PROJECT = "/bench/project"


def build(archive: Archive, windows: int) -> int:
    documents = 0
    source = synthetic_sessions(10**9, project=PROJECT)
    while True:
        for _ in range(1000):
            archive.admit(next(source))
            documents += 1
        count = archive.conn.execute("SELECT count(*) FROM windows").fetchone()[0]
        if count >= windows:
            return documents


def queries(seed: int = 11) -> dict[str, list[str]]:
    rng = random.Random(seed)
    return {
        "lexical": [" ".join(word(rng) for _ in range(rng.randint(2, 4))) for _ in range(200)],
        "exact": [
            rng.choice((f"src/{rng.choice(MODULES)}/{rng.choice(WORDS)}_{rng.choice(WORDS)}.py", rng.choice(ERRORS)))
            for _ in range(100)
        ],
    }


def run(windows: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "archive.db"
        with Archive.open(db) as archive:
            started = time.perf_counter()
            documents = build(archive, windows)
            build_seconds = time.perf_counter() - started
            conn = archive.conn
            window_count = conn.execute("SELECT count(*) FROM windows").fetchone()[0]
            texts = [
                bytes(t).decode()
                for (t,) in conn.execute(
                    "SELECT substr(sqlar_uncompress(c.data, c.byte_length), 1 + w.start_byte - dc.start_byte, w.end_byte - w.start_byte) "
                    "FROM windows w JOIN document_chunks dc ON dc.document_row = w.document_row "
                    "AND dc.start_byte <= w.start_byte AND dc.end_byte >= w.end_byte "
                    "JOIN chunks c ON c.id = dc.chunk_id"
                )
            ]
            qs = queries()
            timings: dict[str, list[float]] = {"lexical": [], "exact": [], "relation": [], "recall": []}
            locators: list[str] = []
            for kind in ("lexical", "exact"):
                for q in qs[kind]:
                    holder: dict = {}
                    timings[kind].append(
                        timed(
                            lambda q=q, holder=holder: holder.update(
                                archive.search({"project": PROJECT, "query": q, "limit": 5})
                            )
                        )
                    )
                    locators.extend(r["locator"] for r in holder["results"][:1])
            for relation in ("latest-question", "latest-request", "latest-correction", "latest-answer") * 25:
                timings["relation"].append(
                    timed(
                        lambda r=relation: archive.search(
                            {
                                "project": PROJECT,
                                "relation": r,
                                "query": random.Random(len(timings["relation"])).choice(WORDS),
                            }
                        )
                    )
                )
            for locator in locators[:200]:
                timings["recall"].append(
                    timed(lambda loc=locator: archive.recall({"locator": loc, "project": PROJECT, "maxTokens": 800}))
                )
            file_bytes = archive.status()["bytes"]["file"]

        bare = apsw.Connection(str(Path(folder) / "bare.db"))
        bare.execute("PRAGMA journal_mode = WAL").fetchall()
        bare.execute("CREATE VIRTUAL TABLE t USING fts5(text)")
        with bare:
            bare.executemany("INSERT INTO t (text) VALUES (?)", ((t,) for t in texts))
        bare_ms = [
            timed(
                lambda q=q: bare.execute(
                    "SELECT rowid, bm25(t) FROM t WHERE t MATCH ? ORDER BY rank LIMIT 10",
                    (" OR ".join(f'"{w}"' for w in q.split()),),
                ).fetchall()
            )
            for q in qs["lexical"]
        ]
        bare.close()

    summary = {
        "windows": window_count,
        "documents": documents,
        "build_seconds": round(build_seconds, 1),
        "archive_bytes": file_bytes,
    }
    for kind, values in list(timings.items()) + [("bare_fts5_lexical", bare_ms)]:
        summary[kind] = latency(values)
    summary["lexical_vs_bare_p50"] = round(summary["lexical"]["p50_ms"] / summary["bare_fts5_lexical"]["p50_ms"], 1)
    return summary


def show(result: dict) -> None:
    print(
        f"{result['windows']} windows in {result['documents']} documents "
        f"(built in {result['build_seconds']} s, {result['archive_bytes'] / 2**20:.1f} MiB)"
    )
    for kind in ("exact", "lexical", "relation", "recall", "bare_fts5_lexical"):
        print(
            f"  {kind:<18} p50 {result[kind]['p50_ms']:8.3f} ms   p95 {result[kind]['p95_ms']:8.3f} ms   n={result[kind]['n']}"
        )
    print(f"  lexical / bare FTS5 p50: {result['lexical_vs_bare_p50']}x")


if __name__ == "__main__":
    for_each_size(__doc__, run, show)
