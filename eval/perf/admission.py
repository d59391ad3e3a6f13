"""Admission and direct-read speed on synthetic coding sessions, against a bare-SQLite baseline.

    python eval/perf/admission.py [--docs 2000] [--sql [--bulk] [--python]] [--files] [--json]

The baseline inserts the same document texts into a one-column table of a WAL-mode file, one
transaction per document, in the same process: the floor any admission path pays to SQLite.
`--sql` admits the documents once more into a new archive with SQLite's statement profile on
(SQLITE_TRACE_PROFILE): wall time and SQL time per document, and the statements that take most;
with `--bulk`, in the one-transaction batches `cwa import` uses; with `--python`, also cwa's
functions that take most of it (cProfile, cumulative). `--files` counts the temporary files SQLite
opens while the documents are admitted once more (a VFS that notes each open).

    python eval/perf/admission.py --frames [--bulk] [--docs 2000] [--into ARCHIVE] [--seed 7] [--json]

`--frames` shows what a document's commit writes: the documents are admitted one a transaction,
and the WAL's automatic checkpoint is replaced by the same checkpoint, as often (every
WAL_CHECKPOINT_PAGES frames), which first names every frame by the table or index its page
belongs to (SQLite's dbstat) and is timed (wall and this process's CPU). Into a new archive (a
quarter as many documents first warm it and are not counted), or with `--into` into ARCHIVE,
which keeps them (give it a copy, e.g. of one `cwa eval perf --keep` built; a `--seed` other than
the build's 7 makes new text). With `--bulk`, in the batches `cwa import` commits (one every
BULK_SECONDS, cwa/store/connection.py), instead of one a transaction.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import cProfile
import pstats
import random
import struct
import sys
import tempfile
import time
from pathlib import Path

import apsw
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import CountingVFS, percentile, timed

from cwa.api import Archive
from cwa.store.connection import BULK_SECONDS, WAL_CHECKPOINT_PAGES, BulkWrites
from cwa_eval.retrieval.sessions import synthetic_sessions


def synthetic_documents(count: int) -> list[dict]:
    return list(synthetic_sessions(count))


def run(count: int) -> dict:
    documents = synthetic_documents(count)
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "archive.db"
        results: dict = {"documents": count}
        with Archive.open(db) as archive:
            ids: list[str] = []
            start = time.perf_counter()
            admit_ms = [timed(lambda d=d: ids.append(archive.admit(d)["documentId"])) for d in documents]
            elapsed = time.perf_counter() - start
            retry_ms = [timed(lambda d=d: archive.admit(d)) for d in documents[:500]]
            get_ms = [timed(lambda i=i: archive.get({"documentId": i})) for i in ids[:500]]
            big = "".join(f"{n:08d} src/big/file.py:{n % 1000} ✓ line of tool output\n" for n in range(120_000))
            holder: dict = {}
            large_ms = timed(
                lambda: holder.update(
                    archive.admit(
                        {
                            "project": "/bench/project",
                            "sessionId": "big",
                            "kind": "tool-result",
                            "messages": [{"role": "toolResult", "text": big}],
                        }
                    )
                )
            )
            big_id = holder["documentId"]
            size = archive.get({"documentId": big_id, "range": {"start": 0, "end": 0}})["byteLength"]
            rng = random.Random(3)
            range_ms = []
            for _ in range(500):
                offset = rng.randrange(0, size - 4096)
                range_ms.append(
                    timed(lambda o=offset: archive.get({"documentId": big_id, "range": {"start": o, "end": o + 4096}}))
                )
            status = archive.status()
        results["admit"] = {
            "p50_ms": percentile(admit_ms, 0.5),
            "p95_ms": percentile(admit_ms, 0.95),
            "docs_per_s": count / elapsed,
        }
        results["retry"] = {"p50_ms": percentile(retry_ms, 0.5)}
        results["get_inline"] = {"p50_ms": percentile(get_ms, 0.5), "p95_ms": percentile(get_ms, 0.95)}
        results["range_4k_of_5mib"] = {
            "p50_ms": percentile(range_ms, 0.5),
            "p95_ms": percentile(range_ms, 0.95),
            "document_bytes": size,
        }
        results["admit_large"] = {"ms": round(large_ms, 1), "document_bytes": size}
        results["bytes"] = {"logical": status["bytes"]["logical"], "file": status["bytes"]["file"]}

        texts = [b"\n\n".join(m["text"].encode() for m in d["messages"]) for d in documents]
        base = apsw.Connection(str(Path(folder) / "baseline.db"))
        for statement in (
            "PRAGMA journal_mode = WAL",
            "PRAGMA synchronous = NORMAL",
            "CREATE TABLE t (id INTEGER PRIMARY KEY, text BLOB)",
        ):
            base.execute(statement).fetchall()

        def insert(text: bytes) -> None:
            with base:
                base.execute("INSERT INTO t (text) VALUES (?)", (text,))

        baseline_ms = [timed(lambda t=t: insert(t)) for t in texts]
        base.close()
        results["baseline_insert"] = {"p50_ms": percentile(baseline_ms, 0.5)}
        results["admit_vs_baseline_p50"] = results["admit"]["p50_ms"] / results["baseline_insert"]["p50_ms"]
    return results


def sql_profile(count: int, shown: int = 8, bulk: bool = False, python: bool = False) -> dict:
    """Where a document's admission time goes: SQLite's own time per statement, the rest Python.
    The first quarter of the documents warms the archive up and is not counted. `bulk`: the
    documents are admitted in one-second batches of one transaction (BulkWrites), as `cwa
    import` admits them. `python`: also Python's own profile of the same loop (cProfile), the
    functions of cwa that take most, cumulative."""
    documents = synthetic_documents(count)
    warm = count // 4
    spent: collections.Counter = collections.Counter()
    runs: collections.Counter = collections.Counter()

    def profile(event: dict) -> None:
        statement = " ".join(event["sql"].split())[:90]
        spent[statement] += event["nanoseconds"]
        runs[statement] += 1

    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "archive.db") as archive:
        for document in documents[:warm]:
            archive.admit(document)
        archive.conn.trace_v2(apsw.SQLITE_TRACE_PROFILE, profile)
        profiler = cProfile.Profile() if python else None
        start = time.perf_counter()
        with (
            profiler or contextlib.nullcontext(),
            BulkWrites(archive.conn, 1.0) if bulk else contextlib.nullcontext() as batches,
        ):
            for document in documents[warm:]:
                archive.admit(document)
                if batches:
                    batches.due()
        wall = time.perf_counter() - start
        archive.conn.trace_v2(0, None)
    counted = count - warm
    functions = []
    if profiler:
        stats = pstats.Stats(profiler).stats  # (file, line, name) → (calls, primitive, own, cumulative, callers)
        ours = [(key, row[3]) for key, row in stats.items() if "/cwa/" in key[0]]
        functions = [
            {"function": f"{Path(f).parent.name}/{Path(f).name}:{name}", "ms_per_doc": round(t * 1000 / counted, 3)}
            for (f, _, name), t in sorted(ours, key=lambda pair: -pair[1])[:14]
        ]
    return {
        "documents": counted,
        "bulk": bulk,
        "python": functions,
        "wall_ms_per_doc": round(wall * 1000 / counted, 3),
        "sql_ms_per_doc": round(sum(spent.values()) / 1e6 / counted, 3),
        "statements_per_doc": round(sum(runs.values()) / counted, 1),
        "top": [
            {"statement": s, "ms_per_doc": round(ns / 1e6 / counted, 3), "runs_per_doc": round(runs[s] / counted, 1)}
            for s, ns in spent.most_common(shown)
        ],
    }


def wal_frames(count: int, into: Path | None = None, seed: int = 7, bulk: bool = False) -> dict:
    """The WAL frames documents write, one a transaction (with `bulk`, in the batches `cwa import`
    commits), by table or index, and the checkpoints that copy them into the file, as often as the
    archive's connections make them (every WAL_CHECKPOINT_PAGES frames), each timed (wall, and this
    process's CPU). At least `count` documents, and on to the end of a checkpoint's cycle: per
    document figures cover whole cycles."""
    source = synthetic_sessions(10**9, seed=seed)
    pages: list[int] = []
    state = {"documents": 0, "covered": 0, "checkpoints": 0, "wall": 0.0, "cpu": 0.0, "reading": 0.0, "distinct": 0}

    def committed(conn: apsw.Connection, name: str, frames: int) -> int:
        # Replaces the automatic checkpoint: the frames are read first, then copied the same way.
        if frames >= WAL_CHECKPOINT_PAGES:
            reading = time.perf_counter()
            cycle = _frame_pages(wal, frames)
            pages.extend(cycle)
            state["distinct"] += len(set(cycle))
            wall, cpu = time.perf_counter(), time.process_time()
            conn.wal_checkpoint(name, apsw.SQLITE_CHECKPOINT_PASSIVE)
            state["wall"] += time.perf_counter() - wall
            state["cpu"] += time.process_time() - cpu
            state["reading"] += wall - reading
            state["checkpoints"] += 1
            state["covered"] = state["documents"]
        return apsw.SQLITE_OK

    with tempfile.TemporaryDirectory() as folder:
        db = into or Path(folder) / "archive.db"
        wal = Path(f"{db}-wal")
        with Archive.open(db) as archive:
            conn = archive.conn
            for _ in range(0 if into else count // 4):
                archive.admit(next(source))
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            conn.set_wal_hook(committed)
            start = time.perf_counter()
            with BulkWrites(conn, BULK_SECONDS) if bulk else contextlib.nullcontext() as batch:
                while state["documents"] < count or state["covered"] < state["documents"]:
                    state["documents"] += 1
                    archive.admit(next(source))
                    if batch is not None:
                        batch.due()
            seconds = time.perf_counter() - start - state["reading"]
            conn.set_wal_hook(None)
            conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
            owners = dict(conn.execute("SELECT pageno, name FROM dbstat").fetchall())
            windows = conn.execute("SELECT count(*) FROM windows").fetchone()[0]
    documents = state["documents"]
    by_owner = collections.Counter(owners.get(page, "(free or new)") for page in pages)
    return {
        "documents": documents,
        "bulk": bulk,
        "archiveWindows": windows,
        "admitMsPerDoc": round(seconds * 1000 / documents, 3),
        "checkpoints": state["checkpoints"],
        "framesPerDoc": round(len(pages) / documents, 1),
        "distinctPagesPerCheckpoint": round(state["distinct"] / state["checkpoints"]),
        "checkpointMsPerDoc": round(state["wall"] * 1000 / documents, 3),
        "checkpointCpuMsPerDoc": round(state["cpu"] * 1000 / documents, 3),
        "framesPerDocBy": {name: round(n / documents, 2) for name, n in by_owner.most_common()},
    }


def _frame_pages(wal: Path, frames: int) -> list[int]:
    """The page number of each of the first `frames` frames of a WAL file (a 32-byte header, then
    frames of a 24-byte header and one page each)."""
    with wal.open("rb") as file:
        header = file.read(32)
        page_size = struct.unpack(">I", header[8:12])[0]
        data = file.read(frames * (24 + page_size))
    return [struct.unpack(">I", data[at : at + 4])[0] for at in range(0, len(data) - 23, 24 + page_size)]


# The kinds of file SQLite opens, by the flag that names each.
FILE_KINDS = {
    "statement journals (savepoints)": apsw.SQLITE_OPEN_SUBJOURNAL,
    "temporary databases": apsw.SQLITE_OPEN_TEMP_DB | apsw.SQLITE_OPEN_TRANSIENT_DB,
    "temporary journals": apsw.SQLITE_OPEN_TEMP_JOURNAL,
}


def files_opened(count: int) -> dict:
    """The temporary files SQLite opens while `count` documents are admitted, one a transaction
    (as `cwa serve` and hooks admit), into a new archive."""
    documents = synthetic_documents(count)
    vfs = CountingVFS()
    try:
        with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "archive.db") as archive:
            opened = len(vfs.flags)
            for document in documents:
                archive.admit(document)
            flags = vfs.flags[opened:]
    finally:
        vfs.unregister()
    return {"documents": count, **{kind: sum(1 for f in flags if f & bit) for kind, bit in FILE_KINDS.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--sql", action="store_true", help="also profile SQLite's share of admission")
    parser.add_argument(
        "--bulk", action="store_true", help="with --sql or --frames: admit in batches, as `cwa import` commits them"
    )
    parser.add_argument("--python", action="store_true", help="with --sql, also Python's profile (cProfile)")
    parser.add_argument("--files", action="store_true", help="also count the temporary files SQLite opens")
    parser.add_argument("--frames", action="store_true", help="only count the WAL frames a document writes, by table")
    parser.add_argument("--into", type=Path, help="with --frames: admit into this archive (a copy; it keeps them)")
    parser.add_argument("--seed", type=int, default=7, help="with --frames: the documents' seed")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.frames:
        found = wal_frames(args.docs, args.into, args.seed, args.bulk)
        if args.json:
            print(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())
            return
        batches = "in import batches" if found["bulk"] else "one a transaction"
        print(
            f"{found['documents']} documents, {batches}, into {found['archiveWindows']:,} windows: "
            f"admit {found['admitMsPerDoc']} ms a document (its checkpoints included), "
            f"{found['framesPerDoc']} WAL frames a document; {found['checkpoints']} checkpoints of about "
            f"{found['distinctPagesPerCheckpoint']:,} distinct pages, {found['checkpointMsPerDoc']} ms a "
            f"document ({found['checkpointCpuMsPerDoc']} ms of it CPU)"
        )
        print("WAL frames a document, by table or index:")
        for name, frames in found["framesPerDocBy"].items():
            print(f"  {frames:>6}  {name}")
        return
    results = run(args.docs)
    if args.sql:
        results["sql"] = sql_profile(args.docs, bulk=args.bulk, python=args.python)
    if args.files:
        results["files"] = files_opened(args.docs)
    if args.json:
        print(orjson.dumps(results, option=orjson.OPT_INDENT_2).decode())
        return
    print(f"documents            {results['documents']}")
    print(
        f"admit                p50 {results['admit']['p50_ms']:.3f} ms  p95 {results['admit']['p95_ms']:.3f} ms  "
        f"{results['admit']['docs_per_s']:.0f} docs/s"
    )
    print(
        f"baseline insert      p50 {results['baseline_insert']['p50_ms']:.3f} ms  "
        f"(admit/baseline {results['admit_vs_baseline_p50']:.1f}x)"
    )
    print(f"idempotent retry     p50 {results['retry']['p50_ms']:.3f} ms")
    print(
        f"get (inline)         p50 {results['get_inline']['p50_ms']:.3f} ms  p95 {results['get_inline']['p95_ms']:.3f} ms"
    )
    print(
        f"4 KiB range of {results['range_4k_of_5mib']['document_bytes'] / 2**20:.1f} MiB  "
        f"p50 {results['range_4k_of_5mib']['p50_ms']:.3f} ms  p95 {results['range_4k_of_5mib']['p95_ms']:.3f} ms"
    )
    print(
        f"admit one {results['admit_large']['document_bytes'] / 2**20:.1f} MiB log  {results['admit_large']['ms']:.0f} ms"
    )
    print(f"bytes                logical {results['bytes']['logical']}  file {results['bytes']['file']}")
    if args.files:
        opened = results["files"]
        print(f"files opened while admitting {opened['documents']} documents, one a transaction:")
        for kind in FILE_KINDS:
            print(f"  {opened[kind]:>6}  {kind}")
    if args.sql:
        found = results["sql"]
        print(
            f"per document         wall {found['wall_ms_per_doc']:.3f} ms, SQLite {found['sql_ms_per_doc']:.3f} ms "
            f"in {found['statements_per_doc']} statements (profiled run of {found['documents']} documents)"
        )
        for top in found["top"]:
            print(f"  {top['ms_per_doc']:.3f} ms  {top['runs_per_doc']:>5}x  {top['statement']}")
        if found["python"]:
            print("cwa's functions, cumulative ms a document (under cProfile, which slows Python down):")
        for top in found["python"]:
            print(f"  {top['ms_per_doc']:.3f} ms  {top['function']}")


if __name__ == "__main__":
    main()
