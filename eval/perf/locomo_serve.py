"""Search and preflight latency at LoCoMo scale through `cwa serve`, against a baseline tree.

    python eval/perf/locomo_serve.py --data ../shared/data/locomo/locomo10.json [--baseline /tmp/base]
                                     [--rounds 2] [--json]

Each tree (this checkout, and a baseline checkout such as `git worktree add /tmp/base <rev>`)
gets its own archive of the 5,882 LoCoMo turns (one document each, embedded), built by that
tree's code. Then, alternating between the trees each round, one `cwa serve` child per tree
answers every question with evidence: a hybrid search (`semanticPolicy: always`), a lexical
search (`never`) and a preflight of "Remind me: <question>" (a fresh session each, so nothing
replays). Latency is measured at the client, request written to reply read; admission is timed
while building (turns/s through the public API, in process). Also reported: the archive file's
bytes per byte of turn text, after admission and after embedding, and each serve child's peak RSS
(the embedding model loaded).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import latency

from cwa_eval.perf.scale import Serve, tree_environment
from cwa_eval.retrieval.locomo import turn_text

BUILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from cwa.api import Archive
from cwa_eval.retrieval.locomo import ingest, load
conversations = load(Path(sys.argv[3]))
path = Path(sys.argv[2])
def size(archive):
    archive.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    return path.stat().st_size
with Archive.open(path) as archive:
    started = time.perf_counter()
    turns = ingest(archive, conversations)
    seconds = time.perf_counter() - started
    before = size(archive)
    archive.call("index-embed", {})
    after = size(archive)
print(turns / seconds, before, after)
"""


def build(tree: Path, archive: Path, data: Path) -> tuple[float, int, int]:
    """The archive built by `tree`'s code: its admission rate in turns/s and the file's bytes
    before and after embedding (WAL checkpointed)."""
    out = subprocess.run(
        [sys.executable, "-c", BUILD, str(tree), str(archive), str(data)],
        check=True,
        capture_output=True,
        cwd=archive.parent,
        env=tree_environment(tree),
    )
    rate, before, after = out.stdout.decode().split()[-3:]
    return float(rate), int(before), int(after)


def measure(
    tree: Path, archive: Path, questions: list[tuple[str, str]], tag: str
) -> tuple[dict[str, list[float]], int]:
    """Client-side milliseconds of each request kind through one `cwa serve` child, and the
    child's peak RSS (VmHWM) at the end."""
    server = Serve(archive, tree)
    timings: dict[str, list[float]] = {"hybrid": [], "lexical": [], "preflight": []}
    try:
        for number, (project, question) in enumerate(questions):
            search = {"project": project, "query": question, "limit": 10, "leaseSeconds": 0}
            requests = {
                "hybrid": ("search", {**search, "semanticPolicy": "always"}),
                "lexical": ("search", {**search, "semanticPolicy": "never"}),
                "preflight": (
                    "preflight",
                    {
                        "project": project,
                        "sessionId": f"bench-{tag}-{number}",
                        "messageKey": "m",
                        "text": "Remind me: " + question,
                    },
                ),
            }
            for kind, (method, params) in requests.items():
                timings[kind].append(server.call(method, params)[0])
        peak = server.peak_rss()
    finally:
        server.close()
    return timings, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--baseline", type=Path, help="a checkout of the baseline revision")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    conversations = orjson.loads(args.data.read_bytes())
    questions = [
        (f"locomo:{c['sample_id']}", qa["question"]) for c in conversations for qa in c["qa"] if qa.get("evidence")
    ]
    text_bytes = sum(
        len(turn_text(turn).encode())
        for c in conversations
        for key, turns in c["conversation"].items()
        if re.fullmatch(r"session_\d+", key) and isinstance(turns, list)
        for turn in turns
    )
    trees = {"this tree": Path(__file__).resolve().parents[2]}
    if args.baseline:
        trees = {"baseline": args.baseline.resolve(), **trees}
    report: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as folder:
        archives = {name: Path(folder) / f"{n}.db" for n, name in enumerate(trees)}
        built = {name: build(tree, archives[name], args.data) for name, tree in trees.items()}
        timings: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
        peaks: dict[str, int] = {}
        for round_number in range(args.rounds):
            for name, tree in trees.items():
                found, peak = measure(tree, archives[name], questions, f"{round_number}")
                peaks[name] = max(peaks.get(name, 0), peak)
                for kind, values in found.items():
                    timings[name].setdefault(kind, []).extend(values)
        for name in trees:
            rate, before, after = built[name]
            report[name] = {
                "admissionTurnsPerSecond": round(rate, 1),
                "archiveBytesPerTextByte": {
                    "withoutVectors": round(before / text_bytes, 2),
                    "withVectors": round(after / text_bytes, 2),
                },
                "servePeakRssBytes": peaks[name],
                **{kind: latency(values) for kind, values in timings[name].items()},
            }
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    for name, found in report.items():
        print(
            f"{name}: admission {found['admissionTurnsPerSecond']} turns/s; "
            + "; ".join(
                f"{kind} p50 {found[kind]['p50_ms']} / p95 {found[kind]['p95_ms']} ms"
                for kind in ("hybrid", "lexical", "preflight")
            )
            + f"; archive {found['archiveBytesPerTextByte']['withoutVectors']}x the text without vectors, "
            f"{found['archiveBytesPerTextByte']['withVectors']}x with; serve peak RSS "
            f"{found['servePeakRssBytes'] / 2**20:.0f} MiB"
        )


if __name__ == "__main__":
    main()
