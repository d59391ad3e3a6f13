"""Embedding throughput and hybrid search latency at a given number of windows.

    python eval/perf/semantic.py --windows 10000 [--windows 100000] [--embed-sample N] [--json]

Builds the synthetic archive of eval/perf/search.py, embeds every window (`index-embed`, batches
of 64, the model loaded once), then times in the same process the same 200 lexical queries with
`semanticPolicy: never` (the lexical baseline) and `always` (query embedding, the project's nearest
vectors, SQL scope filter, fusion).

`--embed-sample N` embeds only N windows with the model (the throughput figure comes from them)
and gives every other window seeded random unit vectors, one a piece as the model would embed it,
written through the same tables, then packs the sign bits in blocks as `cwa serve`'s embedding
worker would. The search cost does not depend on what the stored vectors say (a search scans all
of its project's), so this measures latency at 100K windows without 90 minutes of embedding; the
result says how many vectors were synthetic.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import for_each_size, latency, timed
from search import PROJECT, build, queries

from cwa.api import Archive


def run(windows: int, embed_sample: int | None = None) -> dict:
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "archive.db") as archive:
        build(archive, windows)
        window_count = archive.conn.execute("SELECT count(*) FROM windows").fetchone()[0]
        started = time.perf_counter()
        embedded = archive.call("index-embed", {"limit": embed_sample} if embed_sample else {})["embedded"]
        embed_seconds = time.perf_counter() - started
        synthetic = fill_synthetic(archive) if embed_sample else 0
        timings: dict[str, list[float]] = {"never": [], "always": []}
        for query in queries()["lexical"]:
            for policy in ("never", "always"):
                timings[policy].append(
                    timed(
                        lambda q=query, p=policy: archive.search(
                            {"project": PROJECT, "query": q, "limit": 5, "leaseSeconds": 0, "semanticPolicy": p}
                        )
                    )
                )
    result = {
        "windows": window_count,
        "embedded": embedded,
        "synthetic_vectors": synthetic,
        "embed_seconds": round(embed_seconds, 1),
        "windows_per_second": round(embedded / embed_seconds, 1),
        "lexical": latency(timings["never"]),
        "hybrid": latency(timings["always"]),
    }
    result["hybrid_vs_lexical_p50"] = round(result["hybrid"]["p50_ms"] / result["lexical"]["p50_ms"], 2)
    return result


def fill_synthetic(archive) -> int:
    """Seeded random unit vectors for every window content still queued, as many for each as the
    model would embed (a vector a piece of MAX_TOKENS, cwa/models.py `piece_counts`), so the
    archive's vector bytes and the scan are those of a real one. Returns the vectors stored."""
    import numpy

    from cwa.index.semantic import store_vector
    from cwa.model_variants import active
    from cwa.models import embedder
    from cwa.store.connection import write_transaction
    from cwa.store.reads import window_text
    from cwa.store.sqlfiles import queries as sql_files
    from cwa.store.vector_blocks import BLOCK_VECTORS, pack

    sql = sql_files("semantic")
    conn = archive.conn
    hashes = [r[0] for r in conn.execute("SELECT content_hash FROM embedding_queue")]
    texts = [window_text(conn, *conn.execute(sql["window_for_content"], {"hash": h}).fetchone()) for h in hashes]
    counts = embedder(active(archive.path)).piece_counts(texts)
    pieces = [(content_hash, piece) for content_hash, count in zip(hashes, counts) for piece in range(count)]
    vectors = numpy.random.default_rng(7).standard_normal((len(pieces), 384)).astype(numpy.float32)
    vectors /= numpy.linalg.norm(vectors, axis=1, keepdims=True)
    for at in range(0, len(pieces), BLOCK_VECTORS):
        with write_transaction(conn):
            for (content_hash, piece), vector in zip(pieces[at : at + BLOCK_VECTORS], vectors[at : at + BLOCK_VECTORS]):
                store_vector(conn, content_hash, vector, archive.clock(), piece)
                if piece == 0:  # a content leaves the queue once
                    conn.execute(sql["dequeue"], (content_hash,))
        # as `cwa serve`'s embedding worker packs each whole block once it is embedded, so the
        # pages packing frees take the next vectors' rows
        pack(conn, budget=len(pieces))
    return len(pieces)


def show(result: dict) -> None:
    print(
        f"{result['windows']} windows: embedded {result['embedded']} contents in {result['embed_seconds']} s "
        f"({result['windows_per_second']}/s)"
        + (f"; {result['synthetic_vectors']} synthetic vectors" if result["synthetic_vectors"] else "")
    )
    for name in ("lexical", "hybrid"):
        print(
            f"  {name:<8} p50 {result[name]['p50_ms']:8.3f} ms   p95 {result[name]['p95_ms']:8.3f} ms   n={result[name]['n']}"
        )
    print(f"  hybrid / lexical p50: {result['hybrid_vs_lexical_p50']}x")


def options(parser) -> None:
    parser.add_argument("--embed-sample", type=int, help="embed only N windows; the rest get synthetic vectors")


if __name__ == "__main__":
    for_each_size(__doc__, run, show, options)
