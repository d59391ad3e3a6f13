"""The first full send of a long transcript through `cwa serve`: how long the host waits for its
provider copy, how quickly serve answers other requests while the history is archived in idle
time, and how long that archiving takes.

    python eval/perf/first_send.py [--messages 200000] [--json]

One `cwa serve` child on a fresh archive. The transcript is `--messages` tiny Pi messages (a user
message and an assistant answer per turn), sent once whole, as a host does after a restart. Then
`status` requests go one at a time while the engine archives the history between them (each is a
round trip over the pipe), and `session-status` is polled until no message waits. Finally the
archive is checked: every interaction group before the epoch is recorded as archived, in turn
documents of at most 256 messages.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import latency
from session import Serve

PROJECT = "/bench/first-send"
T0 = 1_795_000_000_000
STATUS_PROBES = 40


def transcript(count: int) -> list[dict[str, Any]]:
    """`count` tiny Pi messages, a question and its answer a turn, each turn naming its own widget
    (tests/test_catch_up.py searches for them)."""
    messages: list[dict[str, Any]] = []
    for number in range(count):
        if number % 2 == 0:
            messages.append(
                {"role": "user", "content": f"turn {number}: look at widget-{number}", "timestamp": T0 + number * 1000}
            )
        else:
            messages.append(
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": f"widget-{number - 1} is ok"}],
                    "stopReason": "stop",
                    "timestamp": T0 + number * 1000,
                }
            )
    return messages


def run(count: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="cwa-first-send-"))
    messages = transcript(count)
    serve = Serve(folder)
    try:
        scope = {"project": PROJECT, "sessionId": "long"}
        answer, first_ms = serve.call(
            "session-context", {**scope, "messages": messages, "model": {"contextWindow": 200_000, "maxTokens": 8_192}}
        )
        rotated = next(e for e in answer["events"] if e["type"] == "rotated")
        probes = []
        for _ in range(STATUS_PROBES):
            probes.append(serve.call("status", {})[1])
        started = time.perf_counter()
        while True:
            status, _ = serve.call("session-status", scope)
            if not status["backlogMessages"]:
                break
            time.sleep(0.2)
        catch_up_s = time.perf_counter() - started + sum(probes) / 1000
    finally:
        serve.close()
    with sqlite3.connect(folder / "archive.db") as db:
        turns = db.execute("SELECT count(*) FROM session_turns").fetchone()[0]
        documents, largest = db.execute(
            "SELECT count(*), max(source_key_count) FROM documents WHERE kind = 'turn'"
        ).fetchone()
    return {
        "messages": count,
        "requestBytes": len(orjson.dumps(messages)),
        "firstAnswerMs": round(first_ms, 1),
        "providerMessages": len(answer["messages"]),
        "backlogMessages": rotated["backlogMessages"],
        "statusWhileArchiving": latency(probes) | {"max_ms": round(max(probes), 3)},
        "archivingSeconds": round(catch_up_s, 1),
        "groupsArchived": turns,
        "groupsBeforeEpoch": rotated["removedGroups"],
        "turnDocuments": documents,
        "largestDocumentMessages": largest,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = run(args.messages)
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    print(
        f"{report['messages']:,} messages ({report['requestBytes'] / 2**20:.1f} MiB): first answer in "
        f"{report['firstAnswerMs'] / 1000:.2f} s with {report['providerMessages']} provider messages; "
        f"{report['backlogMessages']:,} messages archived in idle time in {report['archivingSeconds']} s "
        f"({report['turnDocuments']} turn documents, {report['groupsArchived']:,} of "
        f"{report['groupsBeforeEpoch']:,} groups recorded)"
    )
    probes = report["statusWhileArchiving"]
    print(f"status meanwhile: p50 {probes['p50_ms']} ms, p95 {probes['p95_ms']} ms, max {probes['max_ms']} ms")


if __name__ == "__main__":
    main()
