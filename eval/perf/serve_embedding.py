"""`cwa serve` while its worker embeds: memory, and hybrid search beside the worker, against a baseline tree.

    python eval/perf/serve_embedding.py --data ../shared/data/locomo/locomo10.json [--baseline /tmp/base]
                                        [--conversations 3] [--json]

Each tree (this checkout, and a baseline checkout such as `git worktree add /tmp/base <rev>`)
admits the first CONVERSATIONS LoCoMo conversations with its own code, embeds nothing, and starts
one `cwa serve` child with its embedding worker on. The client then asks the conversations'
questions as hybrid searches (`semanticPolicy: always`, round after round) until the worker has
emptied the queue (`models-status` after every ten searches), so the process holds the model of
its requests and the model of its worker at once. Reported per tree: the seconds the queue took
to drain, hybrid search p50 / p95 meanwhile (client-side), and the child's peak RSS (VmHWM).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import latency

from cwa_eval.perf.scale import Serve, tree_environment

BUILD = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from cwa.api import Archive
from cwa_eval.retrieval.locomo import ingest, load
conversations = load(Path(sys.argv[3]))[: int(sys.argv[4])]
with Archive.open(Path(sys.argv[2])) as archive:
    print(ingest(archive, conversations))
"""
STATUS_EVERY = 10
TIMEOUT_SECONDS = 1800


def measure(tree: Path, archive: Path, data: Path, conversations: int, questions: list[tuple[str, str]]) -> dict:
    subprocess.run(
        [sys.executable, "-c", BUILD, str(tree), str(archive), str(data), str(conversations)],
        check=True,
        capture_output=True,
        cwd=archive.parent,
        env=tree_environment(tree),
    )
    server = Serve(archive, tree, background=True)
    hybrid: list[float] = []
    try:
        queued = server.call("models-status", {})[1]["archive"]["pendingWindows"]
        started = time.perf_counter()
        pending, number = queued, 0
        while pending and time.perf_counter() - started < TIMEOUT_SECONDS:
            project, question = questions[number % len(questions)]
            search = {"project": project, "query": question, "limit": 10, "leaseSeconds": 0}
            hybrid.append(server.call("search", {**search, "semanticPolicy": "always"})[0])
            number += 1
            if number % STATUS_EVERY == 0:
                pending = server.call("models-status", {})[1]["archive"]["pendingWindows"]
        seconds = time.perf_counter() - started
        peak = server.peak_rss()
    finally:
        server.close()
    return {
        "queued": queued,
        "left": pending,
        "drainSeconds": round(seconds, 1),
        "hybridDuringDrain": latency(hybrid),
        "servePeakRssBytes": peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--baseline", type=Path, help="a checkout of the baseline revision")
    parser.add_argument("--conversations", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    chosen = orjson.loads(args.data.read_bytes())[: args.conversations]
    questions = [(f"locomo:{c['sample_id']}", qa["question"]) for c in chosen for qa in c["qa"] if qa.get("evidence")]
    trees = {"this tree": Path(__file__).resolve().parents[2]}
    if args.baseline:
        trees = {"baseline": args.baseline.resolve(), **trees}
    report = {}
    with tempfile.TemporaryDirectory() as folder:
        for number, (name, tree) in enumerate(trees.items()):
            report[name] = measure(tree, Path(folder) / f"{number}.db", args.data, args.conversations, questions)
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    for name, found in report.items():
        h = found["hybridDuringDrain"]
        print(
            f"{name}: {found['queued']:,} windows embedded in {found['drainSeconds']} s "
            f"({found['left']} left); hybrid meanwhile p50 / p95 {h['p50_ms']} / {h['p95_ms']} ms over {h['n']}; "
            f"serve peak RSS {found['servePeakRssBytes'] / 2**20:.0f} MiB"
        )


if __name__ == "__main__":
    main()
