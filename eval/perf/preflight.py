"""Preflight latency at a given number of windows.

    python eval/perf/preflight.py --windows 10000 [--windows 100000] [--json]

Builds the synthetic archive of eval/perf/search.py, then times in the same process:
- preflight's first decision for new message keys (the work done once per user message): short
  implicit follow-ups, explicit historical questions, messages with exact anchors, current-state
  and no-match messages, each with 20 active and 20 visible keys;
- the replay of those same keys (what every later call costs);
- explicit search for the same texts, as the baseline the ratio is taken against.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import for_each_size, latency
from search import PROJECT, build

from cwa.api import Archive
from cwa_eval.perf.scale import preflight_messages


def run(windows: int) -> dict:
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "archive.db") as archive:
        started = time.perf_counter()
        documents = build(archive, windows)
        build_seconds = time.perf_counter() - started
        window_count = archive.conn.execute("SELECT count(*) FROM windows").fetchone()[0]
        texts = preflight_messages(400)
        decide, replay, search = [], [], []
        outcomes: dict[str, int] = {}
        for number, text in enumerate(texts):
            params = {
                "project": PROJECT,
                "sessionId": "bench-live",
                "messageKey": f"bench-{number}",
                "text": text,
                "activeMessageKeys": [f"bench-{k}" for k in range(max(0, number - 20), number)],
                "excludeVisibleSourceKeys": [f"visible-{k}" for k in range(20)],
            }
            start = time.perf_counter()
            result = archive.call("preflight", params)
            decide.append((time.perf_counter() - start) * 1000)
            outcome = result["diagnostics"]["outcome"]
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            start = time.perf_counter()
            archive.call("preflight", params)
            replay.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            archive.search({"project": PROJECT, "query": text, "limit": 3, "leaseSeconds": 0})
            search.append((time.perf_counter() - start) * 1000)
    summary: dict = {
        "windows": window_count,
        "documents": documents,
        "build_seconds": round(build_seconds, 1),
        "outcomes": outcomes,
    }
    for name, values in (("preflight_decide", decide), ("preflight_replay", replay), ("search_baseline", search)):
        summary[name] = latency(values)
    summary["decide_vs_search_p50"] = round(
        summary["preflight_decide"]["p50_ms"] / summary["search_baseline"]["p50_ms"], 2
    )
    return summary


def show(result: dict) -> None:
    print(f"{result['windows']} windows in {result['documents']} documents (built in {result['build_seconds']} s)")
    for name in ("preflight_decide", "preflight_replay", "search_baseline"):
        print(
            f"  {name:<18} p50 {result[name]['p50_ms']:8.3f} ms   p95 {result[name]['p95_ms']:8.3f} ms   n={result[name]['n']}"
        )
    print(f"  decide / search p50: {result['decide_vs_search_p50']}x   outcomes: {result['outcomes']}")


if __name__ == "__main__":
    for_each_size(__doc__, run, show)
