"""Statements planned once: admission, search and preflight with SQLite's query planner stability
guarantee on (as cwa opens every archive) and off, in one process, rounds alternating.

    python eval/perf/prepared.py [--corpus chat|coding] [--documents 3000] [--queries 200] [--rounds 2] [--json]

Without the guarantee SQLite plans a statement that joins tables and binds a parameter with the
bound value in view, and marks it to be planned again whenever another value is bound: the cached
statement is prepared anew on every run (cwa/store/connection.py, STABLE_PLANS). Each round admits
the same documents of the corpus into a new archive each way, then times the same lexical searches
and preflights on it; the statement probe times a few of admission's statements cached against
prepared afresh each time, both ways, on the last archive.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path

import apsw
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import latency

from cwa.api import Archive
from cwa.store import connection
from cwa.store.sqlfiles import queries
from cwa_eval.perf.scale import CORPORA, PROJECTS, lexical_queries, preflight_messages

# Statements of admission that join tables and bind a parameter, with the parameters of a document.
PROBED = (
    ("index", "previous_in_session", lambda row: {"row": row}),
    ("index", "next_window_id", lambda row: {"row": row, "bits": 32, "fresh": False}),
    ("search", "document_summary", lambda row: (row,)),
)


def one_way(folder: Path, corpus: str, documents: list[dict], count: int, stable: bool, tag: str) -> dict:
    """Admit `documents` into a new archive with the guarantee on or off, then search and preflight."""
    connection.STABLE_PLANS = stable  # read as each connection opens
    project = PROJECTS[corpus]
    with Archive.open(folder / f"{tag}.db") as archive:
        started = time.perf_counter()
        for document in documents:
            archive.admit(document)
        seconds = time.perf_counter() - started
        searches, preflights = [], []
        for query in lexical_queries(count):
            began = time.perf_counter()
            archive.search({"project": project, "query": query, "semanticPolicy": "never", "leaseSeconds": 0})
            searches.append((time.perf_counter() - began) * 1000)
        for number, text in enumerate(preflight_messages(count)):
            request = {"project": project, "sessionId": f"{tag}-{number}", "messageKey": "m", "text": text}
            began = time.perf_counter()
            archive.call("preflight", request)
            preflights.append((time.perf_counter() - began) * 1000)
    return {
        "documentsPerSecond": round(len(documents) / seconds, 1),
        "lexical": latency(searches),
        "preflight": latency(preflights),
    }


def probe(path: Path, stable: bool, runs: int = 2000) -> dict:
    """Microseconds a probed statement takes from the statement cache, and prepared afresh each run."""
    found = {}
    for cache in (100, 0):
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY, statementcachesize=cache)
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, int(stable))
        rows = [row for (row,) in conn.execute("SELECT id FROM documents ORDER BY id LIMIT ?", (runs,))]
        for stem, name, params in PROBED:
            sql = queries(stem)[name]
            started = time.perf_counter()
            for row in rows:
                conn.execute(sql, params(row)).fetchall()
            key = f"{name} {'cached' if cache else 'prepared each run'}"
            found[key] = round((time.perf_counter() - started) / len(rows) * 1e6, 1)
        conn.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="chat")
    parser.add_argument("--documents", type=int, default=3000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    documents = list(islice(CORPORA[args.corpus](10**9, project=PROJECTS[args.corpus]), args.documents))
    runs: dict[str, list[dict]] = {"stable": [], "replanned": []}
    with tempfile.TemporaryDirectory() as folder:
        for round_number in range(args.rounds):
            for way in ("replanned", "stable") if round_number % 2 == 0 else ("stable", "replanned"):
                tag = f"{way}-{round_number}"
                runs[way].append(one_way(Path(folder), args.corpus, documents, args.queries, way == "stable", tag))
        last = Path(folder) / f"stable-{args.rounds - 1}.db"
        probes = {way: probe(last, way == "stable") for way in ("replanned", "stable")}
    connection.STABLE_PLANS = True
    report = {"corpus": args.corpus, "documents": args.documents, "runs": runs, "statementMicroseconds": probes}
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    for way, found in runs.items():
        rates = ", ".join(f"{r['documentsPerSecond']:,.0f}" for r in found)
        lexical = ", ".join(f"{r['lexical']['p50_ms']} / {r['lexical']['p95_ms']}" for r in found)
        preflight = ", ".join(f"{r['preflight']['p50_ms']} / {r['preflight']['p95_ms']}" for r in found)
        print(f"{way:10s} admission {rates} documents/s; lexical p50 / p95 {lexical} ms; preflight {preflight} ms")
        print(f"{'':10s} median admission {statistics.median(r['documentsPerSecond'] for r in found):,.0f}")
    for way, found in probes.items():
        print(f"{way:10s} " + "; ".join(f"{k} {v} us" for k, v in found.items()))


if __name__ == "__main__":
    main()
