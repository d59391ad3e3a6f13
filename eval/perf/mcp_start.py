"""How soon a freshly started `cwa mcp` answers: `initialize`, then `tools/list`, as a client
sends them right after spawning the server.

    python eval/perf/mcp_start.py [--runs 15] [--busy 2] [--json]

Each run starts `python -m cwa --db FILE mcp` (the interpreter running this script; PYTHONPATH
picks the tree) on one archive, sends `initialize` and waits for its reply, then
`notifications/initialized` and `tools/list`, reads the server's resident memory (VmRSS), and
closes stdin. `--busy K` keeps K processes
spinning on the CPU meanwhile, a machine busy with other work (a build, the tests). Codex leaves
out of a turn the tools of a server that has not answered within about a second.
"""

from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import latency, percentile

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}
LIST = [{"jsonrpc": "2.0", "method": "notifications/initialized"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]


def _frames(*frames: dict) -> bytes:
    return b"".join(orjson.dumps(frame) + b"\n" for frame in frames)


def _rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1]) / 1024


def one_start(db: Path) -> tuple[float, float, float]:
    """Milliseconds from spawn to the `initialize` reply and to the `tools/list` reply; the
    server's resident MiB then."""
    started = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "cwa", "--db", str(db), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    server.stdin.write(_frames(INITIALIZE))
    server.stdin.flush()
    assert orjson.loads(server.stdout.readline())["id"] == 1
    initialized = time.perf_counter()
    server.stdin.write(_frames(*LIST))
    server.stdin.flush()
    assert orjson.loads(server.stdout.readline())["result"]["tools"]
    listed = time.perf_counter()
    rss = _rss_mib(server.pid)
    server.stdin.close()
    server.wait(timeout=60)
    return (initialized - started) * 1000, (listed - started) * 1000, rss


def _spin() -> None:
    while True:
        pass


def run(runs: int, busy: int) -> dict:
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(busy)]
    for spinner in spinners:
        spinner.start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            db = Path(folder) / "archive.db"
            one_start(db)  # creates the archive: later starts open an existing one, as a client's do
            timings = [one_start(db) for _ in range(runs)]
    finally:
        for spinner in spinners:
            spinner.terminate()
    return {
        "runs": runs,
        "busy": busy,
        "initialize": latency([t[0] for t in timings]),
        "toolsList": latency([t[1] for t in timings]),
        "over1s": sum(t[1] > 1000 for t in timings),
        "rssMiB": round(percentile([t[2] for t in timings], 0.5), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--busy", type=int, default=0, help="processes spinning on the CPU meanwhile")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.runs, args.busy)
    if args.json:
        print(orjson.dumps(result).decode())
        return
    print(
        f"{result['runs']} starts, {result['busy']} busy processes: initialize p50 / p95 "
        f"{result['initialize']['p50_ms']:.0f} / {result['initialize']['p95_ms']:.0f} ms, tools/list "
        f"{result['toolsList']['p50_ms']:.0f} / {result['toolsList']['p95_ms']:.0f} ms, "
        f"{result['over1s']} over 1 s; server RSS then {result['rssMiB']:.0f} MiB"
    )


if __name__ == "__main__":
    main()
