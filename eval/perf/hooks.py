"""Client hook latency at a given number of windows: what a Claude Code hook costs its turn.

    python eval/perf/hooks.py --windows 10000 [--windows 100000] [--json]

Builds the synthetic archive of eval/perf/search.py, starts the archive's hook server with one
event, then times each hook as the client runs it (a `python -m cwa.hook_client` process, from
start to exit):
- the hint path: UserPromptSubmit with a new prompt (preflight decides, the hint is printed);
- the archive path: Stop after one more turn was appended to a Claude Code transcript (2-6 KB of
  tool output per turn), which the server imports incrementally;
- Python starting the client alone (`python -c "import cwa.hook_client"`), the floor of any hook;
- the baseline in the same run: the same prompt event answered by `python -m cwa hook claude`,
  which loads cwa in the hook's own process (what a hook cost before the server).
"""

from __future__ import annotations

import json
import os
import subprocess
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

PROMPTS = 60
TURNS = 40
BASELINE = 10


def _hook(args: list[str], event: dict, env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *args], input=json.dumps(event).encode(), capture_output=True, env=env)
    return (time.perf_counter() - start) * 1000, done.stdout.decode()


def _turn(session: str, number: int, cwd: str) -> list[dict]:
    stamp = f"2026-11-20T10:{number // 60:02d}:{number % 60:02d}.000Z"
    common = {"sessionId": session, "cwd": cwd, "timestamp": stamp, "isSidechain": False}
    output = "\n".join(f"tests/test_module_{number}.py::test_case_{k} PASSED [{k}%]" for k in range(40 + number % 80))
    return [
        {
            **common,
            "type": "user",
            "uuid": f"u{number}",
            "message": {"role": "user", "content": f"run the suite, step {number}"},
        },
        {
            **common,
            "type": "assistant",
            "uuid": f"a{number}",
            "message": {
                "id": f"m{number}",
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"t{number}", "name": "Bash", "input": {"command": "pytest -q"}}
                ],
                "stop_reason": "tool_use",
            },
        },
        {
            **common,
            "type": "user",
            "uuid": f"r{number}",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{number}", "content": output}],
            },
        },
        {
            **common,
            "type": "assistant",
            "uuid": f"b{number}",
            "message": {
                "id": f"n{number}",
                "role": "assistant",
                "content": [{"type": "text", "text": f"Step {number} passes."}],
                "stop_reason": "end_turn",
            },
        },
    ]


def run(windows: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "archive.db"
        with Archive.open(db) as archive:
            documents = build(archive, windows)
            window_count = archive.conn.execute("SELECT count(*) FROM windows").fetchone()[0]
        env = {**os.environ, "CWA_PROJECT": PROJECT, "CWA_DISK_CRITICAL_MEBIBYTES": "0", "XDG_RUNTIME_DIR": folder}
        client = ["-m", "cwa.hook_client", "--db", str(db), "claude"]
        transcript = Path(folder) / "session.jsonl"
        transcript.write_text("")
        base = {"session_id": "bench-hooks", "transcript_path": str(transcript), "cwd": folder}
        started = time.perf_counter()
        _hook(client, {**base, "hook_event_name": "SessionStart", "source": "startup"}, env)
        start_ms = (time.perf_counter() - started) * 1000
        texts = preflight_messages(PROMPTS + BASELINE)
        hint, hinted = [], 0
        for number, text in enumerate(texts[:PROMPTS]):
            event = {**base, "hook_event_name": "UserPromptSubmit", "prompt": text, "prompt_id": f"p{number}"}
            elapsed, out = _hook(client, event, env)
            hint.append(elapsed)
            hinted += bool(out.strip())
        stop = []
        for number in range(TURNS):
            with transcript.open("a") as out:
                out.writelines(json.dumps(line) + "\n" for line in _turn("bench-hooks", number, folder))
            stop.append(_hook(client, {**base, "hook_event_name": "Stop", "stop_hook_active": False}, env)[0])
        client_start = []  # what Python alone costs a hook: the client module imported, nothing done
        for _ in range(BASELINE):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import cwa.hook_client"], check=True, env=env)
            client_start.append((time.perf_counter() - start) * 1000)
        baseline = []
        for number, text in enumerate(texts[PROMPTS:]):
            event = {**base, "hook_event_name": "UserPromptSubmit", "prompt": text, "prompt_id": f"b{number}"}
            baseline.append(_hook(["-m", "cwa", "--db", str(db), "hook", "claude"], event, env)[0])
        subprocess.run(["pkill", "-f", "--", f"--db {db} hook-server"], check=False)
    result = {
        "windows": window_count,
        "documents": documents,
        "server_start_ms": round(start_ms, 1),
        "hint_path": latency(hint),
        "hinted": hinted,
        "archive_path": latency(stop),
        "in_process_hint_baseline": latency(baseline),
        "client_start": latency(client_start),
    }
    result["baseline_vs_hint_p50"] = round(
        result["in_process_hint_baseline"]["p50_ms"] / result["hint_path"]["p50_ms"], 1
    )
    return result


def show(result: dict) -> None:
    print(
        f"{result['windows']} windows in {result['documents']} documents; server start {result['server_start_ms']} ms"
    )
    for name in ("hint_path", "archive_path", "in_process_hint_baseline", "client_start"):
        print(
            f"  {name:<26} p50 {result[name]['p50_ms']:>8} ms  p95 {result[name]['p95_ms']:>8} ms  (n={result[name]['n']})"
        )
    print(
        f"  hints shown: {result['hinted']} of {result['hint_path']['n']}; in-process / server p50: {result['baseline_vs_hint_p50']}x"
    )


if __name__ == "__main__":
    for_each_size(__doc__, run, show)
