"""How soon a new `cwa serve` keeps every common term's window count, on an archive that kept none.

    python eval/perf/term_counts.py ARCHIVE [--runs 2] [--json]

Each run forgets ARCHIVE's kept counts as a purge would (cwa/store/term_counts.py `forget`;
nothing else changes), starts `cwa serve` as a host would (its maintenance thread on, the
embedding worker off) from the tree on PYTHONPATH, and polls from another connection until the
counts are there: the seconds from start and how many terms. Until then a search in that serve
counts each common term it meets.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import apsw
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.store import term_counts
from cwa.store.connection import open_connection, write_transaction


def forget(path: Path) -> None:
    """As a purge or a rebuild leaves the archive: no kept count, the kept set incomplete."""
    conn = open_connection(path)
    try:
        with write_transaction(conn):
            term_counts.forget(conn)
    finally:
        conn.close()


def kept_after_start(path: Path, limit: float = 120.0) -> dict:
    forget(path)
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "cwa", "--db", str(path), "serve", "--no-background"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=os.environ.copy(),
        cwd=path.parent,
    )
    reader = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    terms = 0
    try:
        while not terms and time.monotonic() - started < limit:
            time.sleep(0.05)
            terms = reader.execute("SELECT count(*) FROM term_counts").fetchone()[0]
        seconds = time.monotonic() - started
    finally:
        reader.close()
        child.stdin.close()
        child.wait(timeout=120)
    return {"terms": terms, "seconds": round(seconds, 2) if terms else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs = [kept_after_start(args.archive) for _ in range(args.runs)]
    if args.json:
        print(orjson.dumps({"runs": runs}).decode())
        return
    for number, run in enumerate(runs, 1):
        print(f"run {number}: {run['terms']} terms kept {run['seconds']} s after serve started")


if __name__ == "__main__":
    main()
