"""`cwa eval perf`: cost and size at 10K, 100K and 1M windows, side by side with a bare-FTS5 floor.

For each corpus (`coding`: synthetic coding sessions; `chat`: LoCoMo-shaped short turns) and each
size, one process:
1. admits documents through the public API (`Archive.admit`, every derived index written in the
   same transaction; with `--bulk`, `Archive.admit_many`: archived first in batches, then indexed
   with a helper process preparing) until the archive holds the requested number of windows:
   windows/s, MB/s over the admission calls alone (`seconds`; `wallSeconds` adds making up the
   synthetic corpus);
2. embeds `embedSample` windows with the installed model (embedding throughput, reported apart)
   and gives every other window seeded random unit vectors through the same tables, one a piece
   as the model would embed it, so that a search scans as many vectors as a fully embedded
   archive holds;
3. measures the floor: the same window texts in a bare FTS5 table (default tokenizer, one
   transaction per document, as admission commits), insert throughput and
   `MATCH 'w1 OR w2 …' ORDER BY bm25() LIMIT 10` for the lexical queries;
4. splits the file's bytes by kind (SQLite's dbstat) and divides them by the text bytes;
5. starts one `cwa serve` with maintenance off and times, at the client (request written to reply
   read), preflight's first decision as a first process meets the archive (`preflightUnkept`:
   no pass has kept its common terms' counts, so each is counted when first met);
6. keeps the common terms' counts as a default `cwa serve` does as it starts (`termCountsKept`:
   seconds and terms), then starts one more `cwa serve` and times preflight, exact, lexical and
   hybrid search, recall of the top 3 windows and gather: p50/p95/p99, then reads the
   process's peak RSS;
7. times a one-shot `cwa call search` on that archive.
`cwa --version` cold start is timed once. Sizes above 10K are opt-in (`--sizes`).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import orjson

from cwa.api import Archive
from cwa_eval.perf.bench import percentile
from cwa_eval.retrieval.sessions import ERRORS, MODULES, WORDS, chat_sessions, synthetic_sessions, word

PROJECTS = {"coding": "/bench/project", "chat": "/bench/chat"}
CORPORA: dict[str, Callable[..., Iterator[dict]]] = {"coding": synthetic_sessions, "chat": chat_sessions}
OPERATIONS = ("preflight", "exact", "lexical", "hybrid", "recall3", "gather")
# preflight as a first process meets an archive no maintenance pass has seen
FIRST_PREFLIGHT = "preflightUnkept"
# The kinds a file's bytes are split into, by table (or index) name prefix, first match wins:
# chunks is the canonical store (documents, their messages and content-addressed text).
KINDS = (
    ("fts", ("window_fts",)),
    ("vectors", ("window_vector", "window_embeddings", "embedding_queue", "embedding_refresh")),
    ("exact postings", ("anchor",)),
    ("structure", ("windows", "message_cues", "session_", "supersessions", "index_stats", "checkpoint_parts")),
    ("chunks", ("chunks", "document_chunks", "documents", "messages", "sessions", "projects")),
    (
        "ledgers",
        (
            "hint_",
            "lease",
            "recall_feedback",
            "index_outcomes",
            "expiry_schedule",
            "context_protections",
            "purge_queue",
            "index_generations",
        ),
    ),
)


def percentiles(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    return {f"p{round(f * 100)}_ms": round(percentile(values, f), 3) for f in (0.5, 0.95, 0.99)} | {"n": len(values)}


def lexical_queries(count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(word(rng) for _ in range(rng.randint(2, 4))) for _ in range(count)]


def preflight_messages(count: int, seed: int = 5) -> list[str]:
    """User messages of every shape preflight meets: follow-ups, historical questions, anchors,
    current-state and no-match chatter."""
    rng = random.Random(seed)
    shapes = (
        lambda: f"could {word(rng)} {word(rng)} help here?",
        lambda: f"what did we decide about the {word(rng)} {word(rng)}?",
        lambda: f"remind me why we changed {word(rng)} {word(rng)} {word(rng)}",
        lambda: f"src/{rng.choice(MODULES)}/{rng.choice(WORDS)}_{rng.choice(WORDS)}.py keeps failing",
        lambda: f"{rng.choice(ERRORS)} again in the {word(rng)} worker",
        lambda: "do the tests pass right now?",
        lambda: "thanks, looks good",
        lambda: " ".join(word(rng) for _ in range(rng.randint(8, 20))),
    )
    return [rng.choice(shapes)() for _ in range(count)]


BULK_DOCUMENTS = 50_000  # documents made up, then admitted, per `admit_many` call of a bulk build


def admit_until(
    archive: Archive, corpus: str, windows: int, progress: Callable[[str], None], bulk: bool = False
) -> dict:
    """Admit documents of `corpus` until the archive holds `windows` windows: one `admit` call
    each, or with `bulk` through `admit_many` (archived first in batches, indexed at the end of
    each call with a helper process preparing), as many documents a call as windows are still
    wanted (each corpus's documents have about one window each), at most BULK_DOCUMENTS."""
    source = CORPORA[corpus](10**9, project=PROJECTS[corpus])
    documents = text_bytes = 0
    count = 0
    seconds = 0.0
    started = time.perf_counter()
    while count < windows:
        # The synthetic corpus is made before the clock starts: writing its text is not
        # admission (a short chat turn takes longer to make up than to admit).
        wanted = min(BULK_DOCUMENTS, max(500, windows - count)) if bulk else 500
        batch = [next(source) for _ in range(wanted)]
        text_bytes += sum(len(m["text"].encode()) for document in batch for m in document["messages"])
        begun = time.perf_counter()
        admit_documents(archive, batch, bulk)
        seconds += time.perf_counter() - begun
        documents += len(batch)
        before, count = count, archive.conn.execute("SELECT count(*) FROM windows").fetchone()[0]
        if count * 10 // windows > before * 10 // windows or bulk:  # every tenth of the way
            progress(f"admitted {documents:,} documents, {count:,} windows")
    return {
        "bulk": bulk,
        "documents": documents,
        "windows": count,
        "textBytes": text_bytes,
        "seconds": round(seconds, 1),
        "wallSeconds": round(time.perf_counter() - started, 1),
        "windowsPerSecond": round(count / seconds, 1),
        "documentsPerSecond": round(documents / seconds, 1),
        "megabytesPerSecond": round(text_bytes / 1e6 / seconds, 3),
    }


def admit_documents(archive: Archive, documents: list[dict], bulk: bool) -> None:
    """One `admit` call a document, or with `bulk` one `admit_many` call for all."""
    if bulk:
        archive.admit_many(documents)
        return
    for document in documents:
        archive.admit(document)


def embed(archive: Archive, sample: int) -> dict:
    """The model's throughput on `sample` windows; seeded random unit vectors for the rest."""
    from cwa_eval.perf.semantic import fill_synthetic

    started = time.perf_counter()
    embedded = archive.call("index-embed", {"limit": sample})["embedded"] if sample else 0
    seconds = time.perf_counter() - started
    return {
        "embedded": embedded,
        "windowsPerSecond": round(embedded / seconds, 1) if embedded else None,
        "syntheticVectors": fill_synthetic(archive),
    }


def window_texts(conn: apsw.Connection) -> list[tuple[int, str]]:
    """(document row, text) of every window, in document order."""
    return [
        (row, bytes(text).decode())
        for row, text in conn.execute(
            "SELECT w.document_row, substr(sqlar_uncompress(c.data, c.byte_length), 1 + w.start_byte - dc.start_byte, "
            "w.end_byte - w.start_byte) "
            "FROM windows w JOIN document_chunks dc ON dc.document_row = w.document_row "
            "AND dc.start_byte <= w.start_byte AND dc.end_byte >= w.end_byte "
            "JOIN chunks c ON c.id = dc.chunk_id ORDER BY w.document_row, w.start_byte"
        )
    ]


def floor(folder: Path, texts: list[tuple[int, str]], queries: list[str]) -> dict:
    """Bare FTS5 over the same window texts: insert throughput (one transaction per document) and
    BM25 top-10 latency for the same lexical queries."""
    bare = apsw.Connection(str(folder / "floor.db"))
    for statement in (
        "PRAGMA journal_mode = WAL",
        "PRAGMA synchronous = NORMAL",
        "CREATE VIRTUAL TABLE t USING fts5(text)",
    ):
        bare.execute(statement).fetchall()
    started = time.perf_counter()
    at = 0
    while at < len(texts):
        end = at
        while end < len(texts) and texts[end][0] == texts[at][0]:
            end += 1
        with bare:
            bare.executemany("INSERT INTO t (text) VALUES (?)", ((text,) for _, text in texts[at:end]))
        at = end
    seconds = time.perf_counter() - started
    text_bytes = sum(len(text.encode()) for _, text in texts)
    timings = []
    for query in queries:
        match = " OR ".join(f'"{w}"' for w in query.split())
        begun = time.perf_counter()
        bare.execute("SELECT rowid, bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 10", (match,)).fetchall()
        timings.append((time.perf_counter() - begun) * 1000)
    bare.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    bare.close()
    return {
        "windowsPerSecond": round(len(texts) / seconds, 1),
        "megabytesPerSecond": round(text_bytes / 1e6 / seconds, 3),
        "fileBytes": (folder / "floor.db").stat().st_size,
        "lexical": percentiles(timings),
    }


def bytes_by_kind(path: Path, text_bytes: int) -> dict:
    """The archive file's pages by kind (dbstat), in bytes and per text byte."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    split: dict[str, int] = {kind: 0 for kind, _ in KINDS} | {"other": 0}
    for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
        table = re.sub(r"^sqlite_autoindex_(.+)_\d+$", r"\1", name)  # a UNIQUE constraint's index
        kind = next((k for k, prefixes in KINDS if table.startswith(prefixes)), "other")
        split[kind] += size
    free = conn.execute("PRAGMA freelist_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    split["free"] = free
    file_bytes = path.stat().st_size
    return {
        "file": file_bytes,
        "perTextByte": round(file_bytes / text_bytes, 2),
        "withoutVectors": round((file_bytes - split["vectors"]) / text_bytes, 2),
        "kinds": split,
        "kindsPerTextByte": {k: round(v / text_bytes, 3) for k, v in split.items()},
    }


# `cwa serve` run from the checkout in argv[1] (a baseline tree), not from the installed package.
SERVE_FROM_TREE = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = 'cwa'; from cwa.cli import main; main()"
)


def tree_environment(tree: Path | None, **extra: str) -> dict[str, str]:
    """The environment of a child running `tree`'s code: the tree first on PYTHONPATH too, so the
    processes that child starts (`cwa serve`'s index worker, `python -m cwa.…`) run the same tree,
    not the installed cwa (which may upgrade the archive to a schema the tree cannot open)."""
    env = {**os.environ, **extra}
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree), env.get("PYTHONPATH", "")) if p)
    return env


class Serve:
    """One `cwa serve` child answering JSON lines (from `tree`'s code when given, in a neutral
    working directory; its embedding worker off unless `background`); every request timed at the
    client."""

    def __init__(self, db: Path, tree: Path | None = None, background: bool = False) -> None:
        start = [sys.executable, "-c", SERVE_FROM_TREE, str(tree)] if tree else [sys.executable, "-m", "cwa"]
        self.child = subprocess.Popen(
            [*start, "serve", "--background" if background else "--no-background", "--maintenance-interval", "0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=tree_environment(tree, CWA_DB=str(db)),
            cwd=db.parent,
        )
        self.number = 0

    def call(self, method: str, params: dict) -> tuple[float, dict]:
        self.number += 1
        line = orjson.dumps({"id": self.number, "method": method, "params": params}) + b"\n"
        started = time.perf_counter()
        self.child.stdin.write(line)
        self.child.stdin.flush()
        reply = orjson.loads(self.child.stdout.readline())
        elapsed = (time.perf_counter() - started) * 1000
        if "error" in reply:
            raise RuntimeError(f"{method} failed: {reply['error']}")
        return elapsed, reply["result"]

    def peak_rss(self) -> int:
        status = Path(f"/proc/{self.child.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) * 1024

    def close(self) -> None:
        self.child.stdin.close()
        self.child.wait(timeout=120)


def exact_queries(corpus: str, count: int, seed: int = 3) -> list[str]:
    """Paths and error codes of the coding corpus's vocabulary (the same at every size); the chat
    corpus holds no identifiers."""
    if corpus != "coding":
        return []
    rng = random.Random(seed)
    return [
        rng.choice((f"src/{rng.choice(MODULES)}/{rng.choice(WORDS)}_{rng.choice(WORDS)}.py", rng.choice(ERRORS)))
        for _ in range(count)
    ]


def time_preflights(server: Serve, project: str, count: int, sessions: str) -> list[float]:
    """Client-side milliseconds of preflight's first decision on `count` messages, after one
    untimed warm-up. Preflight freezes each decision per session and message, so each run on an
    archive names its sessions apart (`sessions`) to decide afresh."""
    call = {"project": project, "messageKey": "m"}
    server.call("preflight", {**call, "sessionId": f"{sessions}-warm", "text": "warm up?"})
    return [
        server.call("preflight", {**call, "sessionId": f"{sessions}-{number}", "text": text})[0]
        for number, text in enumerate(preflight_messages(count))
    ]


def preflight_only(db: Path, corpus: str, count: int, sessions: str) -> dict:
    """Preflight alone through one `cwa serve` (maintenance off, as every serve of this runner):
    on an archive no maintenance pass has seen, each common term is counted the first time a
    message meets it."""
    server = Serve(db)
    try:
        return percentiles(time_preflights(server, PROJECTS[corpus], count, sessions))
    finally:
        server.close()


def time_keeping_common_terms(db: Path) -> dict:
    """Keep every common term's window count, as a default `cwa serve` does as it starts (its
    maintenance thread, cwa/store/maintenance.py): seconds and terms kept."""
    from cwa.store import term_counts
    from cwa.store.connection import open_connection

    conn = open_connection(db)
    try:
        started = time.perf_counter()
        kept = term_counts.refresh(conn)
        return {"seconds": round(time.perf_counter() - started, 2), "terms": kept}
    finally:
        conn.close()


def operations(db: Path, corpus: str, count: int, sessions: str = "perf") -> tuple[dict, int]:
    """Client-side latency of each operation through one `cwa serve`, and its peak RSS; each run
    on an archive names its preflight sessions apart (`sessions`)."""
    project = PROJECTS[corpus]
    server = Serve(db)
    timings: dict[str, list[float]] = {name: [] for name in OPERATIONS}
    try:
        search = {"project": project, "limit": 10, "leaseSeconds": 0}
        # Warm-up, untimed: the embedding model and the ranker load on first use.
        server.call("search", {**search, "query": "warm up", "semanticPolicy": "always"})
        timings["preflight"] = time_preflights(server, project, count, sessions)
        for query in exact_queries(corpus, count):
            timings["exact"].append(server.call("search", {**search, "query": query})[0])
        for query in lexical_queries(count):
            elapsed, found = server.call("search", {**search, "query": query, "semanticPolicy": "never"})
            timings["lexical"].append(elapsed)
            locators = [r["locator"] for r in found["results"][:3]]
            if locators:
                timings["recall3"].append(
                    sum(server.call("recall", {"project": project, "locator": locator})[0] for locator in locators)
                )
            timings["hybrid"].append(server.call("search", {**search, "query": query, "semanticPolicy": "always"})[0])
            timings["gather"].append(server.call("gather", {"project": project, "query": query})[0])
        rss = server.peak_rss()
    finally:
        server.close()
    return {name: percentiles(values) for name, values in timings.items()}, rss


def cold_start(
    arguments: list[str], stdin: bytes = b"", env: dict | None = None, runs: int = 7, module: bool = False
) -> dict:
    """Wall-clock milliseconds of a fresh `cwa …` process: median and best of `runs`, after one
    untimed run that leaves each module's bytecode behind, as an installed cwa has it (the child
    may write it even where PYTHONDONTWRITEBYTECODE is set, which would otherwise time compiling
    every module on every start). The `cwa` script beside the interpreter, or with `module`
    `python -m cwa`, which runs the tree that PYTHONPATH names even when the script's entry point
    is another tree's."""
    program = [sys.executable, "-m", "cwa"] if module else [str(Path(sys.executable).with_name("cwa"))]
    command = [*program, *arguments]
    child = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | (env or {})
    timings = []
    for run in range(runs + 1):
        started = time.perf_counter()
        subprocess.run(command, input=stdin, capture_output=True, check=True, env=child)
        if run:
            timings.append((time.perf_counter() - started) * 1000)
    return {"median_ms": round(statistics.median(timings), 1), "best_ms": round(min(timings), 1), "runs": runs}


def measure(
    corpus: str,
    windows: int,
    count: int,
    embed_sample: int,
    progress: Callable[[str], None],
    keep: Path | None = None,
    bulk: bool = False,
) -> dict:
    project = PROJECTS[corpus]
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "archive.db"
        with Archive.open(db) as archive:
            admission = admit_until(archive, corpus, windows, progress, bulk)
            texts = window_texts(archive.conn)
            without_vectors = bytes_by_kind(db, admission["textBytes"])  # checkpoints the WAL itself
            progress(f"embedding {embed_sample:,} windows")
            embedding = embed(archive, embed_sample)
        progress("bare FTS5 floor")
        queries = lexical_queries(count)
        bare = floor(Path(folder), texts, queries)
        del texts
        size = bytes_by_kind(db, admission["textBytes"])
        progress("serving")
        first = preflight_only(db, corpus, count, "first")
        kept = time_keeping_common_terms(db)
        latency, rss = operations(db, corpus, count)
        latency[FIRST_PREFLIGHT] = first
        one_shot = cold_start(
            ["call", "search"], orjson.dumps({"project": project, "query": queries[0]}), {"CWA_DB": str(db)}, runs=3
        )
        if keep:
            keep_archive(db, keep / f"{corpus}-{windows}.db")
    return {
        "corpus": corpus,
        "requested": windows,
        "admission": admission,
        "embedding": embedding,
        "floor": bare,
        "bytes": size,
        "bytesBeforeEmbedding": without_vectors,
        "latency": latency,
        "termCountsKept": kept,
        "servePeakRssBytes": rss,
        "coldCallSearch": one_shot,
        "ratios": {
            "lexicalP95OverFloor": _ratio(latency["lexical"], bare["lexical"], "p95_ms"),
            "lexicalP50OverFloor": _ratio(latency["lexical"], bare["lexical"], "p50_ms"),
            "admissionOverFloorInsert": round(admission["windowsPerSecond"] / bare["windowsPerSecond"], 3),
        },
    }


def keep_archive(db: Path, target: Path) -> None:
    """Move a measured archive (and its WAL, if one is left) out of the temporary folder."""
    target.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal"):
        source = db.with_name(db.name + suffix)
        if source.exists():
            shutil.move(source, target.with_name(target.name + suffix))


def _ratio(mine: dict, base: dict, key: str) -> float | None:
    return round(mine[key] / base[key], 2) if mine.get(key) and base.get(key) else None


def run(
    sizes: list[int],
    corpora: list[str],
    count: int,
    embed_sample: int,
    progress: Callable[[str], None] = lambda _: None,
    keep: Path | None = None,
    bulk: bool = False,
) -> dict:
    report = {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "sqlite": apsw.sqlite_lib_version()},
        "queriesPerOperation": count,
        "embedSample": embed_sample,
        "coldVersion": cold_start(["--version"]),
        "runs": [],
    }
    for corpus in corpora:
        for windows in sizes:
            progress(f"{corpus} at {windows:,} windows")
            report["runs"].append(measure(corpus, windows, count, embed_sample, progress, keep, bulk))
    return report


def print_report(report: dict) -> None:
    print(
        f"cold `cwa --version`: median {report['coldVersion']['median_ms']} ms "
        f"(best {report['coldVersion']['best_ms']} ms); {report['queriesPerOperation']} queries per operation"
    )
    for found in report["runs"]:
        a, f = found["admission"], found["floor"]
        print(
            f"\n{found['corpus']}: {a['windows']:,} windows in {a['documents']:,} documents, "
            f"{a['textBytes'] / 2**20:.1f} MiB of text"
        )
        print(
            f"  admission{' (admit_many)' if a.get('bulk') else ''} {a['windowsPerSecond']:,.0f} windows/s "
            f"({a['megabytesPerSecond']} MB/s, {a['seconds']:,} s); floor insert "
            f"{f['windowsPerSecond']:,.0f} windows/s; ratio {found['ratios']['admissionOverFloorInsert']}"
        )
        e = found["embedding"]
        print(
            f"  embedding {e['windowsPerSecond']} windows/s over {e['embedded']:,} "
            f"(+{e['syntheticVectors']:,} synthetic vectors)"
        )
        print(f"  {'operation':<16}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}")
        for name, timing in [*found["latency"].items(), ("floor FTS5", f["lexical"])]:
            if timing["n"]:
                print(f"  {name:<16}{timing['p50_ms']:>10}{timing['p95_ms']:>10}{timing['p99_ms']:>10}")
        kept = found["termCountsKept"]
        print(
            f"  common terms kept as a serve starts: {kept['terms']:,} in {kept['seconds']} s "
            f"({FIRST_PREFLIGHT}: preflight before that)"
        )
        print(f"  lexical p95 / floor p95: {found['ratios']['lexicalP95OverFloor']}")
        b = found["bytesBeforeEmbedding"]
        print(
            f"  archive without vectors {b['file'] / 2**20:.1f} MiB = {b['perTextByte']}x text: "
            + ", ".join(f"{k} {v}" for k, v in b["kindsPerTextByte"].items() if v)
        )
        print(f"  with vectors {found['bytes']['file'] / 2**20:.1f} MiB = {found['bytes']['perTextByte']}x text")
        print(
            f"  serve peak RSS {found['servePeakRssBytes'] / 2**20:.0f} MiB; cold `cwa call search` median "
            f"{found['coldCallSearch']['median_ms']} ms"
        )
