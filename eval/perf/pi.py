"""What the cwa extension adds to one model call through a real Pi 1.6.0 (RPC mode, the faux model).

    python eval/perf/pi.py [--turns 40] [--session-tokens 150000] [--json]

Needs Pi (`.ci/install-tools`). The extension's `context` handler is timed from the moment Pi hands it
the messages to the moment it returns the provider copy: the `session-context` round trip to the
`cwa serve` child, JSON on both sides, the engine's work and the rebuild of the copy
(CWA_PI_TRACE). First the session is grown to `--session-tokens` provider tokens in one epoch
(a 400K-token faux window, 3K-token user messages; rotation off), then `--turns` short turns are
measured, each a user message, a `read` tool call and an answer: two model calls, so two round
trips per turn (after the user message, which runs preflight, and after the tool result).
For scale, the same measured turns run through a Pi without the extension, alternating with it
turn by turn: the wall time of a whole turn (RPC prompt to agent_settled) with and without.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import latency
from pi_host import FAUX, Pi, pi_env, pi_installed

WORDS = (
    "retry",
    "backoff",
    "payment",
    "gateway",
    "timeout",
    "socket",
    "schema",
    "migration",
    "parser",
    "exporter",
    "flaky",
    "fixture",
    "upload",
    "budget",
    "cache",
    "invalidate",
    "worker",
    "queue",
)


def filler(number: int, tokens: int) -> str:
    """A user message of about `tokens` tokens (chars/4), distinct per turn."""
    words, size = [], 0
    k = number * 7919
    while size < tokens * 4:
        k = (k * 1103515245 + 12345) % (1 << 31)
        word = f"{WORDS[k % len(WORDS)]}{k % 97}"
        words.append(word)
        size += len(word) + 1
    return f"context dump {number}: " + " ".join(words)


def run(turns: int, session_tokens: int) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="cwa-pi-bench-"))
    settings = {
        "CWA_TEST_FAUX_WINDOW": "400000",
        "CWA_ROTATION_TURNS": "10000",
        "CWA_PI_TRACE": str(folder / "trace.jsonl"),
    }
    with_cwa = Pi(folder / "with", pi_env(folder / "with", **settings))
    without = Pi(folder / "without", pi_env(folder / "without", **settings), extensions=(FAUX,))
    for pi in (with_cwa, without):
        (pi.work / "notes.txt").write_text("the retry budget is 5 attempts\n" * 20)
    try:
        started = time.perf_counter()
        grown = 0
        while grown < session_tokens:
            with_cwa.prompt(filler(grown, 3000))
            grown += 3000
        build_seconds = time.perf_counter() - started
        trace = folder / "trace.jsonl"
        measured_from = len(trace.read_text().splitlines())
        wall = {"with": [], "without": []}
        call = 'CALL {"name": "read", "arguments": {"path": "notes.txt"}}'
        for number in range(turns):
            for name, pi in (("with", with_cwa), ("without", without)):
                begin = time.perf_counter()
                pi.prompt(f"turn {number}: check the notes again. {call}")
                wall[name].append((time.perf_counter() - begin) * 1000)
        records = [json.loads(line) for line in trace.read_text().splitlines()[measured_from:]]
        status = with_cwa.statuses()[-1]
    finally:
        with_cwa.close()
        without.close()
    user = [r["ms"] for r in records if r["last"] == "user"]
    other = [r["ms"] for r in records if r["last"] != "user"]
    return {
        "sessionTokens": records[-1]["tokens"] if records else None,
        "transcriptMessages": records[-1]["messages"] if records else None,
        "footer": status,
        "buildSeconds": round(build_seconds, 1),
        "roundTrip": latency([r["ms"] for r in records]),
        "roundTripAfterUserMessage": latency(user),
        "roundTripAfterToolResult": latency(other),
        "deltaShare": round(sum(r["mode"] == "delta" for r in records) / len(records), 3) if records else None,
        "turnWithCwa": latency(wall["with"]),
        "turnWithoutCwa": latency(wall["without"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--session-tokens", type=int, default=150_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not pi_installed():
        print("Pi is not installed: run .ci/install-tools", file=sys.stderr)
        return 2
    result = run(args.turns, args.session_tokens)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"session: ~{result['sessionTokens']} provider tokens, {result['transcriptMessages']} messages "
        f"(built in {result['buildSeconds']} s); footer: {result['footer']}"
    )
    for key in ("roundTrip", "roundTripAfterUserMessage", "roundTripAfterToolResult", "turnWithCwa", "turnWithoutCwa"):
        value = result[key]
        print(f"{key:28} p50 {value['p50_ms']:8.2f} ms   p95 {value['p95_ms']:8.2f} ms   n={value['n']}")
    print(f"delta requests: {result['deltaShare']:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
