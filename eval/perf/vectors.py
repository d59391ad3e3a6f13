"""Semantic nearest neighbours: the project-scoped sign-bit shortlist rescored with the int8
vectors (sql/semantic.sql `nearest`, migrations 0016 and 0018) against the exhaustive float32
scan of sqlite-vec's vec0 (how cwa searched before), on the same vectors in the same process.

    python eval/perf/vectors.py --data …/locomo10.json [--questions 300] [--json]
    python eval/perf/vectors.py --vectors 100000 --vectors 1000000 [--projects 10] [--json]
    python eval/perf/vectors.py --convert 100000 [--json]

`--data`: overlap. Embeds LoCoMo's turns and questions with the installed model (read in place,
never copied), and reports, per oversampling factor, the share of the exhaustive float32 top k
(k = 10, 20, 40) that the shortlist then rescoring returns.

`--convert N`: the background conversion of N float32 vectors (archives embedded before
migration 0018) into the int8 table: vectors a second, and the pages it frees.

`--vectors N`: latency. Seeded random unit vectors (the scan's cost does not depend on what they
say) spread over `--projects` projects, the largest holding half; times `nearest` for the
largest project and for the smallest with their sign bits in rows (`largestRows`,
`smallestRows`) and across every project (`nearest_everywhere`: `everywhereRows`), then packs
them in blocks (cwa/store/vector_blocks.py: `packSeconds`, and whether the largest project's
results stay the same) and times the three again (and the memory the every-project search holds
at its peak: `everywherePeakBytes`, tracemalloc); then the vec0 exhaustive k-nearest; 20 queries
each, k = 40
(the search's first batch); and the bytes a vector takes in each table (SQLite's dbstat: whole
pages, so a page's unused space counts), then again after a VACUUM (before migration 0028,
packing emptied the rows' bits in place and only a VACUUM gave their pages back).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import latency

from cwa.index.semantic import OVERSAMPLE, nearest_contents
from cwa.store.connection import open_connection
from cwa.store.vector_blocks import pack
from cwa.store.vector_format import convert, quantized

DIMENSIONS = 384
BATCH = 20_000


def fill(conn, vectors: np.ndarray, projects: np.ndarray, baseline: bool) -> None:
    """The vectors as an archive stores them (window_embeddings, int8 window_vectors, the float32
    vectors' sign bits in window_vector_bits), and, when `baseline`, in a vec0 float32 table as
    schemas 4-15 did."""
    if baseline:
        conn.execute(f"CREATE VIRTUAL TABLE baseline USING vec0 (embedding float[{DIMENSIONS}] distance_metric=cosine)")
    with conn:
        for project in sorted(set(projects.tolist())):
            conn.execute(
                "INSERT INTO projects (id, identity, created_at) VALUES (?, ?, 'bench')", (project, f"/p{project}")
            )
    for start in range(0, len(vectors), BATCH):
        rows = [
            (start + i + 1, vectors[start + i].astype("<f4").tobytes()) for i in range(min(BATCH, len(vectors) - start))
        ]
        with conn:
            conn.executemany(
                "INSERT INTO window_embeddings (id, content_hash, embedded_at) VALUES (?, ?, 0)",
                [(i, f"h{i}") for i, _ in rows],
            )
            conn.executemany(
                "INSERT INTO window_vectors (id, embedding) VALUES (?, ?)",
                [(i, quantized(vectors[i - 1])) for i, _ in rows],
            )
            conn.executemany(
                "INSERT INTO window_vector_bits (project_id, embedding_id, bits) VALUES (?, ?, vec_quantize_binary(?))",
                [(int(projects[i - 1]), i, blob) for i, blob in rows],
            )
            if baseline:
                conn.executemany("INSERT INTO baseline (rowid, embedding) VALUES (?, ?)", rows)


# The tables a stored vector takes space in (dbstat names): cwa's, and the vec0 baseline's shadow tables
VECTOR_TABLES = {
    "window_vectors": ("window_vectors",),
    "window_vector_bits": ("window_vector_bits",),
    "window_vector_blocks": ("window_vector_blocks",),
    "vec0Baseline": ("baseline",),
}


def bytes_per_vector(conn, count: int) -> dict[str, float]:
    pages = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
    return {
        table: round(sum(size for name, size in pages if name.startswith(prefixes)) / count, 1)
        for table, prefixes in VECTOR_TABLES.items()
    }


def nearest(conn, vector: np.ndarray, k: int, project: int | None, oversample: int = OVERSAMPLE) -> list[int]:
    return [row for row, _ in nearest_contents(conn, project, vector, k, oversample)]


def overlap(data: Path, questions: int) -> dict:
    from cwa.model_variants import active
    from cwa.models import embedder

    conversations = orjson.loads(data.read_bytes())
    turns = [
        t["text"]
        for c in conversations
        for key, session in c["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for t in session
    ]
    asked = [q["question"] for c in conversations for q in c["qa"]][::7][:questions]
    model = embedder(active(None))  # the graph an archive embeds with
    started = time.perf_counter()
    stored = np.asarray(model.embed(turns), dtype=np.float32)
    wanted = np.asarray(model.embed(asked), dtype=np.float32)
    embed_seconds = time.perf_counter() - started
    found: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        conn = open_connection(Path(folder) / "vectors.db")
        fill(conn, stored, np.ones(len(stored), dtype=np.int64), baseline=False)
        exact = wanted @ stored.T
        for k in (10, 20, 40):
            best = [set((np.argsort(-row)[:k] + 1).tolist()) for row in exact]
            for oversample in (4, 8, 16, 32):
                shares = [len(b & set(nearest(conn, q, k, 1, oversample))) / k for b, q in zip(best, wanted)]
                found.setdefault(f"k{k}", {})[f"x{oversample}"] = round(float(np.mean(shares)), 4)
        conn.close()
    return {"vectors": len(turns), "questions": len(asked), "embedSeconds": round(embed_seconds, 1), "overlap": found}


def speed(count: int, project_count: int, seed: int = 7) -> dict:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((count, DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    # the largest project holds half; the others share the rest evenly
    projects = (
        np.where(rng.random(count) < 0.5, 1, rng.integers(2, project_count + 1, count))
        if project_count > 1
        else np.ones(count, dtype=np.int64)
    )
    asked = rng.standard_normal((20, DIMENSIONS)).astype(np.float32)
    asked /= np.linalg.norm(asked, axis=1, keepdims=True)
    with tempfile.TemporaryDirectory() as folder:
        conn = open_connection(Path(folder) / "vectors.db")
        started = time.perf_counter()
        fill(conn, vectors, projects, baseline=True)
        fill_seconds = time.perf_counter() - started
        sizes = dict(conn.execute("SELECT project_id, count(*) FROM window_vector_bits GROUP BY project_id").fetchall())
        smallest = min(sizes, key=sizes.get)

        def timed(action) -> list[float]:
            times = []
            for vector in asked:
                begun = time.perf_counter()
                action(vector)
                times.append((time.perf_counter() - begun) * 1000)
            return times

        baseline_sql = "SELECT rowid, distance FROM baseline WHERE embedding MATCH ? AND k = 40"
        result = {
            "vectors": count,
            "projects": len(sizes),
            "largestProject": sizes[1],
            "smallestProject": sizes[smallest],
            "fillSeconds": round(fill_seconds, 1),
            "largestRows": latency(timed(lambda v: nearest(conn, v, 40, 1))),
            "smallestRows": latency(timed(lambda v: nearest(conn, v, 40, smallest))),
            "everywhereRows": latency(timed(lambda v: nearest(conn, v, 40, None))),
        }
        unpacked = [nearest(conn, v, 40, 1) for v in asked]
        started = time.perf_counter()
        result["packed"] = pack(conn, budget=count)
        result["packSeconds"] = round(time.perf_counter() - started, 1)
        result["sameResultsPacked"] = [nearest(conn, v, 40, 1) for v in asked] == unpacked
        result.update(
            largest=latency(timed(lambda v: nearest(conn, v, 40, 1))),
            smallest=latency(timed(lambda v: nearest(conn, v, 40, smallest))),
            everywhere=latency(timed(lambda v: nearest(conn, v, 40, None))),
            everywherePeakBytes=peak_bytes(lambda: nearest(conn, asked[0], 40, None)),
            vec0Exhaustive=latency(timed(lambda v: conn.execute(baseline_sql, (v.tobytes(),)).fetchall())),
            bytesPerVector=bytes_per_vector(conn, count),
        )
        conn.execute("VACUUM")  # what `cwa maintain --vacuum` does: packed rows' emptied pages back
        result["bytesPerVectorVacuumed"] = bytes_per_vector(conn, count)
        conn.close()
    return result


def peak_bytes(action) -> int:
    """The most memory Python and numpy held at once during `action` beyond what they held
    before (tracemalloc: numpy reports its arrays' buffers to it)."""
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def conversion(count: int, seed: int = 7) -> dict:
    """How fast the background conversion moves float32 vectors (as archives embedded before
    migration 0018 hold them) into the int8 table, and the pages it frees."""
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((count, DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "vectors.db"
        conn = open_connection(path)
        for start in range(0, count, BATCH):
            ids = range(start + 1, min(start + BATCH, count) + 1)
            with conn:
                conn.executemany(
                    "INSERT INTO window_embeddings (id, content_hash, embedded_at) VALUES (?, ?, 0)",
                    [(i, f"h{i}") for i in ids],
                )
                conn.executemany(
                    "INSERT INTO window_vectors_float32 (id, embedding) VALUES (?, ?)",
                    [(i, vectors[i - 1].tobytes()) for i in ids],
                )
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        started = time.perf_counter()
        converted = convert(conn, count)
        seconds = time.perf_counter() - started
        free = conn.execute("PRAGMA freelist_count").fetchone()[0] * page
        result = {
            "vectors": count,
            "converted": converted,
            "seconds": round(seconds, 1),
            "perSecond": round(converted / seconds),
            "fileBytes": path.stat().st_size,
            "freeBytesAfter": free,
        }
        conn.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="locomo10.json, for the overlap with the exhaustive scan")
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--vectors", type=int, action="append", default=[], help="time the scans at N vectors")
    parser.add_argument("--projects", type=int, default=10)
    parser.add_argument("--convert", type=int, help="time the float32 → int8 conversion of N vectors")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict = {"oversample": OVERSAMPLE}
    if args.data:
        report["overlap"] = overlap(args.data, args.questions)
    report["speed"] = [speed(count, args.projects) for count in args.vectors]
    if args.convert:
        report["conversion"] = conversion(args.convert)
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    if "overlap" in report:
        o = report["overlap"]
        print(f"overlap with the exhaustive float32 top k: {o['vectors']:,} LoCoMo turns, {o['questions']} questions")
        for k, shares in o["overlap"].items():
            print(f"  {k}: " + ", ".join(f"{factor} {share:.4f}" for factor, share in shares.items()))
    for s in report["speed"]:
        print(
            f"{s['vectors']:,} vectors in {s['projects']} projects (largest {s['largestProject']:,}, "
            f"smallest {s['smallestProject']:,}), k = 40, p50 / p95 ms:"
        )
        for name in ("largestRows", "largest", "smallestRows", "smallest", "everywhereRows", "everywhere"):
            print(f"  {name:15} {s[name]['p50_ms']:8.1f} / {s[name]['p95_ms']:8.1f}")
        print(f"  {'vec0Exhaustive':15} {s['vec0Exhaustive']['p50_ms']:8.1f} / {s['vec0Exhaustive']['p95_ms']:8.1f}")
        print(f"  every project, packed: {s['everywherePeakBytes'] / 2**20:.1f} MiB of Python and numpy at the peak")
        print(
            f"  packed {s['packed']:,} in {s['packSeconds']} s; same results: {s['sameResultsPacked']}; "
            "(no suffix: packed in blocks)"
        )
        print("  bytes a vector: " + ", ".join(f"{table} {size:,.0f}" for table, size in s["bytesPerVector"].items()))
        vacuumed = s["bytesPerVectorVacuumed"].items()
        print("  after VACUUM: " + ", ".join(f"{table} {size:,.0f}" for table, size in vacuumed))
    if "conversion" in report:
        c = report["conversion"]
        print(
            f"conversion of {c['vectors']:,} float32 vectors: {c['seconds']} s, {c['perSecond']:,} a second; "
            f"free pages after: {c['freeBytesAfter'] / 1e6:,.0f} of {c['fileBytes'] / 1e6:,.0f} MB"
        )


if __name__ == "__main__":
    main()
