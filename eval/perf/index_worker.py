"""What the index worker does per document, and how long it holds the write lock.

    python eval/perf/index_worker.py [--logs 12] [--drain 0] [--json]

Admits the `logs` scenario's build logs (eval/perf/session.py: 50–225 KB each) deferred, as
`cwa serve` does, then indexes each from the queue (cwa/store/index_queue.py) and reports per
document its size, the whole time, and the time its write transaction takes, BEGIN to COMMIT
(`index_prepared`): the wait a request that writes meanwhile may meet. (Before 2026-12-06 this
timed only the handlers inside the transaction, `index_deferred`, not what follows them: the
queue row, the deflated chunks, FTS5's writes at the commit, the commit itself.) With `--drain N`, also N synthetic
coding turn documents (eval/retrieval/sessions.py) admitted deferred, then the whole queue indexed
at once, as a search or the worker finds it after a burst: documents a second, and the longest
write transaction (a batch of small documents shares one, cwa/store/index_queue.py).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import percentile
from session import log_output

from cwa import contract
from cwa.api import Archive
from cwa.config import load_settings
from cwa.store import index_queue
from cwa.store.admission import admit


def _timed_transactions(held: list[float]) -> Callable[[], None]:
    """Time each of the index queue's write transactions, BEGIN to COMMIT, into `held` in
    milliseconds; returns what undoes it. `index_prepared` is one transaction; a tree from before
    it (727f982 and earlier: this script copied into that checkout) has `index_queued` open
    `write_transaction` itself, which is timed instead."""
    if hasattr(index_queue, "index_prepared"):
        name, transaction = "index_prepared", index_queue.index_prepared

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return transaction(*args, **kwargs)
            finally:
                held.append((time.perf_counter() - started) * 1000)

    else:
        name, transaction = "write_transaction", index_queue.write_transaction

        @contextlib.contextmanager
        def timed(conn):
            started = time.perf_counter()
            with transaction(conn):
                yield
            held.append((time.perf_counter() - started) * 1000)

    setattr(index_queue, name, timed)
    return lambda: setattr(index_queue, name, transaction)


def run(count: int) -> dict:
    rng = random.Random(5)
    logs = [log_output(rng) for _ in range(count)]
    locked: list[float] = []
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        settings = load_settings(None, env={"CWA_DISK_CRITICAL_MEBIBYTES": "0"})
        with Archive.open(Path(folder) / "archive.db", settings=settings) as archive:
            undo = _timed_transactions(locked)
            try:
                for number, text in enumerate(logs):
                    request = {
                        "project": "/bench/worker",
                        "sessionId": "s",
                        "kind": "tool-result",
                        "messages": [{"role": "toolResult", "text": text, "key": f"log-{number}"}],
                    }
                    admit(archive.conn, request, handlers=archive.handlers, now=archive.clock(), deferred=True)
                    started = time.perf_counter()
                    index_queue.index_queued(archive.conn, archive.handlers, archive.clock())
                    whole = (time.perf_counter() - started) * 1000
                    rows.append({"bytes": len(text), "wholeMs": round(whole, 1), "lockedMs": round(locked[-1], 1)})
            finally:
                undo()
    held = [r["lockedMs"] for r in rows]
    return {
        "documents": rows,
        "locked": {"min_ms": min(held), "p50_ms": percentile(held, 0.5), "max_ms": max(held)},
        "whole": {"p50_ms": percentile([r["wholeMs"] for r in rows], 0.5)},
    }


def drain(count: int) -> dict:
    from cwa_eval.retrieval.sessions import synthetic_sessions

    source = synthetic_sessions(10**9, project="/bench/drain")
    documents = [next(source) for _ in range(count)]
    held: list[float] = []

    with tempfile.TemporaryDirectory() as folder:
        settings = load_settings(None, env={"CWA_DISK_CRITICAL_MEBIBYTES": "0"})
        with Archive.open(Path(folder) / "archive.db", settings=settings) as archive:
            for document in documents:
                document = contract.validate(contract.ADMIT, document)  # as Archive.admit does
                admit(archive.conn, document, handlers=archive.handlers, now=archive.clock(), deferred=True)
            undo = _timed_transactions(held)
            try:
                started = time.perf_counter()
                done = index_queue.index_queued(archive.conn, archive.handlers, archive.clock())
                seconds = time.perf_counter() - started
            finally:
                undo()
    return {
        "documents": done,
        "documentsPerSecond": round(done / seconds, 1),
        "transactions": len(held),
        "longestTransactionMs": round(max(held), 1),
        "transactionP50Ms": round(percentile(held, 0.5), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", type=int, default=12)
    parser.add_argument("--drain", type=int, default=0, help="also drain a queue of this many turn documents")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.logs)
    if args.drain:
        result["drain"] = drain(args.drain)
    if args.json:
        print(orjson.dumps(result).decode())
        return
    for row in result["documents"]:
        print(f"{row['bytes']:>8,} bytes: {row['wholeMs']:7.1f} ms, of which {row['lockedMs']:5.1f} ms under the lock")
    print(f"under the lock: {result['locked']}; whole: {result['whole']}")
    if args.drain:
        print(f"drain: {result['drain']}")


if __name__ == "__main__":
    main()
