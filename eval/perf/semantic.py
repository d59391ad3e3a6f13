"""Embedding throughput and hybrid search latency at a given number of windows.

    python eval/perf/semantic.py --windows 10000 [--windows 100000] [--json]

Builds the synthetic archive of eval/perf/search.py, embeds every window (`index-embed`, batches
of 64, the model loaded once), then times in the same process the same 200 lexical queries with
`semanticPolicy: never` (the lexical baseline) and `always` (query embedding, sqlite-vec nearest
neighbours, SQL scope filter, fusion).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import for_each_size, latency, timed  # noqa: E402
from search import PROJECT, build, queries  # noqa: E402

from cwa.api import Archive  # noqa: E402


def run(windows: int) -> dict:
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "archive.db") as archive:
        build(archive, windows)
        window_count = archive.conn.execute("SELECT count(*) FROM windows").fetchone()[0]
        started = time.perf_counter()
        embedded = archive.call("index-embed", {})["embedded"]
        embed_seconds = time.perf_counter() - started
        timings: dict[str, list[float]] = {"never": [], "always": []}
        for query in queries()["lexical"]:
            for policy in ("never", "always"):
                timings[policy].append(timed(lambda q=query, p=policy: archive.search(
                    {"project": PROJECT, "query": q, "limit": 5, "leaseSeconds": 0, "semanticPolicy": p})))
    result = {"windows": window_count, "embedded": embedded, "embed_seconds": round(embed_seconds, 1),
              "windows_per_second": round(embedded / embed_seconds, 1),
              "lexical": latency(timings["never"]), "hybrid": latency(timings["always"])}
    result["hybrid_vs_lexical_p50"] = round(result["hybrid"]["p50_ms"] / result["lexical"]["p50_ms"], 2)
    return result


def show(result: dict) -> None:
    print(f"{result['windows']} windows: embedded {result['embedded']} contents in {result['embed_seconds']} s "
          f"({result['windows_per_second']}/s)")
    for name in ("lexical", "hybrid"):
        print(f"  {name:<8} p50 {result[name]['p50_ms']:8.3f} ms   p95 {result[name]['p95_ms']:8.3f} ms   n={result[name]['n']}")
    print(f"  hybrid / lexical p50: {result['hybrid_vs_lexical_p50']}x")


if __name__ == "__main__":
    for_each_size(__doc__, run, show)
