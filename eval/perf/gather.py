"""Gather latency at a given number of windows, lexical and hybrid.

    python eval/perf/gather.py --windows 10000 [--windows 100000] [--embed-sample N] [--json]

Builds the synthetic archive of eval/perf/search.py, embeds its windows as eval/perf/semantic.py
does (`--embed-sample N`: N with the model, the rest with seeded random unit vectors, which cost
sqlite-vec the same scan), then times in the same process 200 questions (the lexical queries of
search.py, asked as gather with intent `auto`: 5 anchors, 1 neighbour before and 3 after, 12
records, 2,000 tokens) with semantic retrieval off (lexical) and on (hybrid). Explicit search of
the same texts (limit 5, hybrid) is the baseline the ratio is taken against.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import for_each_size, latency, timed
from search import PROJECT, build, queries
from semantic import fill_synthetic

from cwa.api import Archive
from cwa.config import load_settings


def run(windows: int, embed_sample: int | None = None) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "archive.db"
        with Archive.open(path) as archive:
            build(archive, windows)
            window_count = archive.conn.execute("SELECT count(*) FROM windows").fetchone()[0]
            embedded = archive.call("index-embed", {"limit": embed_sample} if embed_sample else {})["embedded"]
            synthetic = fill_synthetic(archive) if embed_sample else 0
        timings: dict[str, list[float]] = {"lexical": [], "hybrid": [], "search": []}
        records = 0
        for mode, semantic in (("lexical", "false"), ("hybrid", "true")):
            settings = load_settings(
                None,
                env={
                    "CWA_SEMANTIC_RETRIEVAL": semantic,
                    "HOME": folder,
                    "XDG_CONFIG_HOME": folder,
                    "CWA_DISK_CRITICAL_MEBIBYTES": "0",
                },
            )
            with Archive.open(path, settings=settings) as archive:
                for query in queries()["lexical"]:
                    found: dict = {}
                    timings[mode].append(
                        timed(
                            lambda q=query, found=found: found.update(
                                archive.call("gather", {"project": PROJECT, "query": q})
                            )
                        )
                    )
                    records += len(found["items"])
                    if semantic == "true":
                        timings["search"].append(
                            timed(
                                lambda q=query: archive.search(
                                    {
                                        "project": PROJECT,
                                        "query": q,
                                        "limit": 5,
                                        "leaseSeconds": 0,
                                        "semanticPolicy": "always",
                                    }
                                )
                            )
                        )
    result = {
        "windows": window_count,
        "embedded": embedded,
        "synthetic_vectors": synthetic,
        "records_per_gather": round(records / (2 * len(queries()["lexical"])), 1),
        "lexical": latency(timings["lexical"]),
        "hybrid": latency(timings["hybrid"]),
        "hybrid_search": latency(timings["search"]),
    }
    result["hybrid_gather_vs_search_p50"] = round(result["hybrid"]["p50_ms"] / result["hybrid_search"]["p50_ms"], 2)
    return result


def show(result: dict) -> None:
    print(
        f"{result['windows']:,} windows ({result['synthetic_vectors']:,} synthetic vectors), "
        f"{result['records_per_gather']} records per gather"
    )
    for mode in ("lexical", "hybrid", "hybrid_search"):
        timing = result[mode]
        print(f"  {mode:<14} p50 {timing['p50_ms']:8.2f} ms   p95 {timing['p95_ms']:8.2f} ms")


if __name__ == "__main__":
    for_each_size(
        __doc__, run, show, lambda parser: parser.add_argument("--embed-sample", type=int, help="embed only N windows")
    )
