"""One `admit` call a document against `admit_many`, in one process, alternately.

    python eval/perf/bulk_admission.py [--data ../shared/data/locomo/locomo10.json]
                                       [--coding 20000] [--rounds 2] [--json]

Each round builds, into new archives, LoCoMo's 5,882 dialog turns (one document each) and
`--coding` documents of the synthetic coding corpus `cwa eval perf` admits (a document about one
window), once with one `Archive.admit` call a document and once with one `Archive.admit_many`
call for all (archived first in batches, a helper process preparing what each batch queued while
the next is archived, the rest indexed at the end). The documents are made before the clock
starts; each rate is documents a second over the call(s) alone. Every build ends with the same
derived rows (tests/test_bulk_admission.py checks it), so only the time differs.

    python eval/perf/bulk_admission.py --into ARCHIVE [--coding 20000] [--seed 8] [--json]
    python eval/perf/bulk_admission.py --statements 12 [--coding 10000] [--json]

admits `--coding` new documents of the coding corpus (another `--seed` than the build's 7, in
sessions of their own) into ARCHIVE's coding project with one `admit_many` call: bulk admission
into a large archive without building one (give it a copy, e.g. of the 1M archive `cwa eval perf
--sizes 1000000 --corpora coding --keep DIR` builds; it keeps what it admits). It also reports
the CPU time a document took in this process (the writer) and in the helper preparing.

`--statements N` admits `--coding` documents into a new archive with one `admit_many` and lists
the N write statements (not the reads) that took the writer the most time, each with its count
and mean (each call timed around `execute` or `executemany`, one call however many rows; the run
is a little slower for it).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from collections import Counter
from itertools import islice
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.api import Archive
from cwa_eval.perf.scale import CORPORA, PROJECTS, admit_documents
from cwa_eval.retrieval import locomo
from cwa_eval.retrieval.sessions import synthetic_sessions


def rate(documents: list[dict], bulk: bool) -> float:
    """Documents a second admitting `documents` into a new archive."""
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "a.db") as archive:
        started = time.perf_counter()
        admit_documents(archive, documents, bulk)
        seconds = time.perf_counter() - started
        assert archive.status({})["indexQueue"]["documents"] == 0
    return len(documents) / seconds


def into(path: Path, count: int, seed: int) -> dict:
    """`count` new coding documents admitted into the archive at `path` with one `admit_many`."""
    source = synthetic_sessions(10**9, seed=seed, project=PROJECTS["coding"])
    documents = [
        {**document, "sessionId": f"into-{seed}-{document['sessionId']}"} for document in islice(source, count)
    ]
    with Archive.open(path) as archive:
        started, cpu = time.perf_counter(), _cpu_seconds()
        archive.admit_many(documents)
        seconds = time.perf_counter() - started
    spent = [round((after - before) / count * 1e6, 1) for before, after in zip(cpu, _cpu_seconds())]
    return {
        "documents": count,
        "seconds": round(seconds, 2),
        "documentsPerSecond": round(count / seconds, 1),
        # which of the two processes a document's time went to (the helper's once it has ended)
        "cpuMicrosecondsPerDocument": {"writer": spent[0], "helper": spent[1]},
    }


class _TimedConnection:
    """The archive's connection, every write statement it runs (`execute`, `executemany`) timed,
    named by the first 60 characters of its SQL, comments and spacing folded."""

    def __init__(self, conn) -> None:
        self.conn, self.spent, self.calls = conn, Counter(), Counter()

    def __getattr__(self, name: str):
        return getattr(self.conn, name)

    def execute(self, sql: str, *args, **kwargs):
        return self._timed(self.conn.execute, sql, *args, **kwargs)

    def executemany(self, sql: str, *args, **kwargs):
        return self._timed(self.conn.executemany, sql, *args, **kwargs)

    def _timed(self, run, sql: str, *args, **kwargs):
        started = time.perf_counter_ns()
        cursor = run(sql, *args, **kwargs)
        name = " ".join(line for line in sql.split("\n") if not line.lstrip().startswith("--"))
        name = " ".join(name.split())[:60]
        if not name.upper().startswith(("SELECT", "WITH")):
            self.spent[name] += time.perf_counter_ns() - started
            self.calls[name] += 1
        return cursor


def statements(count: int, top: int) -> list[dict]:
    """The `top` write statements of one `admit_many` of `count` coding documents by time spent."""
    documents = list(islice(CORPORA["coding"](10**9, project=PROJECTS["coding"]), count))
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "a.db") as archive:
        timed = _TimedConnection(archive.conn)
        archive.conn = timed
        archive.admit_many(documents)
        archive.conn = timed.conn
    return [
        {
            "statement": name,
            "calls": timed.calls[name],
            "seconds": round(spent / 1e9, 3),
            "meanMicroseconds": round(spent / timed.calls[name] / 1e3, 1),
        }
        for name, spent in timed.spent.most_common(top)
    ]


def _cpu_seconds() -> tuple[float, float]:
    """CPU seconds used so far by this process and by its ended children (the helper)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time(), children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--coding", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--into", type=Path, help="an archive (a copy) to admit new coding documents into")
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--statements", type=int, metavar="N", help="the N costliest write statements instead")
    args = parser.parse_args()
    if args.statements:
        found = statements(args.coding, args.statements)
        for row in found if not args.json else []:
            print(f"{row['seconds']:8.3f} s {row['calls']:7,} × {row['meanMicroseconds']:7.1f} µs  {row['statement']}")
        if args.json:
            print(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())
        return
    if args.into is not None:
        found = into(args.into, args.coding, args.seed)
        print(orjson.dumps(found).decode() if args.json else f"{found['documentsPerSecond']} documents a second")
        return
    source = CORPORA["coding"](10**9, project=PROJECTS["coding"])
    sets = {
        "locomo": list(locomo.turn_requests(locomo.load(args.data))),
        "coding": [next(source) for _ in range(args.coding)],
    }
    found: dict[str, dict[str, list[float]]] = {name: {"admit": [], "admitMany": []} for name in sets}
    for _ in range(args.rounds):
        for name, documents in sets.items():
            for way, bulk in (("admit", False), ("admitMany", True)):
                found[name][way].append(round(rate(documents, bulk), 1))
    report = {
        name: {
            "documents": len(sets[name]),
            "documentsPerSecond": ways,
            "ratioOfMedians": round(statistics.median(ways["admitMany"]) / statistics.median(ways["admit"]), 2),
        }
        for name, ways in found.items()
    }
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    for name, row in report.items():
        ways = row["documentsPerSecond"]
        print(
            f"{name}: {row['documents']:,} documents; admit {ways['admit']} /s, admit_many {ways['admitMany']} /s "
            f"(× {row['ratioOfMedians']})"
        )


if __name__ == "__main__":
    main()
