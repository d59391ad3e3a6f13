"""Session-engine overhead through `cwa serve`, and prompt-cache reuse over a scripted session.

    python eval/perf/session.py [--turns 200] [--json]

One `cwa serve` child (no background work) per scenario, driven the way the Pi extension drives
it: one `session-context` request before every model call (after the user message, and after each
tool result), carrying only the new messages and the digest of the prefix (`delta`), or the whole
transcript (`full`, what a host sends once after a restart). Times are round trips over the pipe,
JSON encoding on both sides included. Scenarios:

- `no-rotation`: a transcript grown to 150K provider tokens in one epoch (1M-token window,
  rotationTurns raised); then full requests of that transcript, and deltas of further turns.
- `rotation`: a scripted coding session (default 200 turns, 1–5 tool round trips each, some large
  outputs) on a 200K window with default settings: deltas that rotate and deltas that do not,
  and the prompt-cache reuse: for each request, the share of its input tokens that repeat the
  previous request's prefix (token-weighted over the session, and the mean per request).
- `externalized`: 50 tool results of 600 KB (a 30 MB transcript) externalized into the archive;
  then full requests of that transcript, and deltas of further turns.
- `logs`: the `rotation` session's shape (default 200 turns, 200K window) where every fifth turn's
  first tool call returns a log of 50–225 KB, which the engine externalizes: every delta, those
  that carry a log (`logDelta`), those that rotate, and, of the others, the user-message deltas
  (preflight included) and the rest, as in the other scenarios. `--gap-ms` pauses before each
  tool-result request and after each turn (a tool running, a user typing); default none: back to back.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import latency

from cwa.session.transcript import entry_of
from cwa_eval.retrieval.sessions import ERRORS, _path, _sentence, _symbol, _tool_output

PROJECT = "/bench/session"
T0 = 1_795_000_000_000


class Serve:
    """One `cwa serve` child on a fresh archive."""

    def __init__(self, folder: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CWA_")}
        env.update(
            HOME=str(folder),
            XDG_CONFIG_HOME=str(folder / "cfg"),
            PI_CODING_AGENT_DIR=str(folder / "pi"),
            CWA_DB=str(folder / "archive.db"),
            CWA_DISK_CRITICAL_MEBIBYTES="0",
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cwa", "serve", "--no-background", "--maintenance-interval", "0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self.next_id = 0

    def call(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], float]:
        self.next_id += 1
        line = orjson.dumps({"id": self.next_id, "method": method, "params": params}) + b"\n"
        start = time.perf_counter()
        self.process.stdin.write(line)
        self.process.stdin.flush()
        reply = orjson.loads(self.process.stdout.readline())
        elapsed = (time.perf_counter() - start) * 1000
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"], elapsed

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=120)


class Script:
    """A deterministic coding session in Pi's message shapes."""

    def __init__(self, seed: int = 11, big_output_every: int = 9) -> None:
        self.rng = random.Random(seed)
        self.messages: list[dict[str, Any]] = []
        self.clock = 0
        self.calls = 0
        self.turns = 0
        self.big_every = big_output_every

    def _at(self) -> int:
        self.clock += 1_000
        return T0 + self.clock

    def user(self) -> None:
        rng = self.rng
        self.turns += 1
        text = rng.choice(
            (
                f"why does {_path(rng)} raise {rng.choice(ERRORS)} when the {_sentence(rng, 2, 3)}?",
                f"please refactor {_symbol(rng)} so the {_sentence(rng, 2, 4)} is configurable",
                f"no, don't change {_path(rng)}; use {_symbol(rng)} instead",
                _sentence(rng, 8, 40),
            )
        )
        self.messages.append({"role": "user", "content": text, "timestamp": self._at()})

    def tool_call(self, output: str | None = None) -> None:
        rng = self.rng
        self.calls += 1
        call = f"call_{self.calls}"
        self.messages.append(
            {
                "role": "assistant",
                "api": "faux",
                "provider": "faux",
                "model": "faux-1",
                "usage": {},
                "stopReason": "toolUse",
                "timestamp": self._at(),
                "content": [
                    {"type": "text", "text": _sentence(rng, 5, 25)},
                    {
                        "type": "toolCall",
                        "id": call,
                        "name": "bash",
                        "arguments": {"command": f"pytest -q {_path(rng)}"},
                    },
                ],
            }
        )
        if output is None:
            big = self.big_every and self.calls % self.big_every == 0
            output = "\n".join(_tool_output(rng) for _ in range(12 if big else 1))
        self.messages.append(
            {
                "role": "toolResult",
                "toolCallId": call,
                "toolName": "bash",
                "isError": False,
                "content": [{"type": "text", "text": output}],
                "timestamp": self._at(),
            }
        )

    def answer(self) -> None:
        self.messages.append(
            {
                "role": "assistant",
                "api": "faux",
                "provider": "faux",
                "model": "faux-1",
                "usage": {},
                "stopReason": "stop",
                "timestamp": self._at(),
                "content": [{"type": "text", "text": _sentence(self.rng, 30, 120)}],
            }
        )


class Driver:
    """A host: delta requests by default, the provider copy kept by applying the answers."""

    def __init__(
        self, serve: Serve, session: str, model: dict[str, Any], settings: dict[str, Any] | None = None
    ) -> None:
        self.serve, self.session, self.model, self.settings = serve, session, model, settings or {}
        self.sent, self.digest = 0, None
        self.copy: list[dict[str, Any]] = []
        self.copies: list[list[dict[str, Any]]] = []
        self.delta_ms: list[tuple[float, bool, bool]] = []  # (ms, rotated, ends with a user message)
        self.status: dict[str, Any] = {}

    def params(self, messages: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
        params = {"project": PROJECT, "sessionId": self.session, "model": self.model, "messages": messages, **more}
        if self.settings:
            params["settings"] = self.settings
        return params

    def context(self, script: Script, keep: bool = True) -> None:
        if self.digest is None:
            result, ms = self.serve.call("session-context", self.params(script.messages, answer="delta"))
        else:
            result, ms = self.serve.call(
                "session-context", self.params(script.messages[self.sent :], answer="delta", baseDigest=self.digest)
            )
        delta = result["delta"]
        self.copy = self.copy[: delta["keep"]] + delta["append"]
        if keep:
            self.copies.append(self.copy)
        self.digest, self.sent, self.status = result["digest"], len(script.messages), result["status"]
        self.delta_ms.append(
            (ms, any(e["type"] == "rotated" for e in result["events"]), script.messages[-1]["role"] == "user")
        )

    def full(self, script: Script) -> float:
        result, ms = self.serve.call("session-context", self.params(script.messages))
        assert result["messages"][: len(self.copy)] == self.copy, "a full request must rebuild the same copy"
        return ms

    def turn(self, script: Script, tools: int | None = None, output: str | None = None) -> None:
        script.user()
        self.context(script)
        for _ in range(script.rng.randint(1, 5) if tools is None else tools):
            script.tool_call(output)
            self.context(script)
        script.answer()
        self.serve.call("session-settled", {"project": PROJECT, "sessionId": self.session})


def tokens(message: dict[str, Any]) -> int:
    return entry_of(message, 0).tokens


def cache_reuse(copies: list[list[dict[str, Any]]]) -> dict[str, float]:
    """Share of each request's input tokens that repeat the previous request's prefix."""
    repeated_total = input_total = 0
    shares = []
    for previous, current in zip(copies, copies[1:]):
        size = [tokens(m) for m in current]
        shared = 0
        for index, message in enumerate(current):
            if index >= len(previous) or previous[index] != message:
                break
            shared += size[index]
        repeated_total += shared
        input_total += sum(size)
        shares.append(shared / max(1, sum(size)))
    return {
        "tokenWeighted": round(repeated_total / max(1, input_total), 4),
        "meanPerRequest": round(sum(shares) / max(1, len(shares)), 4),
        "requests": len(copies),
    }


def deltas(samples: list[tuple[float, bool, bool]]) -> dict[str, Any]:
    """Latency of deltas that did not rotate: all, those carrying a new user message (automatic
    preflight runs for it), and the others (assistant and tool messages)."""
    steady = [(ms, user) for ms, rotated, user in samples if not rotated]
    return {
        "delta": latency([ms for ms, _ in steady]),
        "userDelta": latency([ms for ms, user in steady if user]),
        "otherDelta": latency([ms for ms, user in steady if not user]),
    }


def no_rotation(folder: Path) -> dict[str, Any]:
    serve = Serve(folder)
    model = {"id": "big", "provider": "faux", "contextWindow": 1_000_000, "maxTokens": 32_000}
    driver, script = Driver(serve, "no-rotation", model, {"rotationTurns": 10_000}), Script(big_output_every=0)
    while driver.status.get("tokens", 0) < 150_000:
        driver.turn(script)
    built = len(driver.delta_ms)
    size = len(orjson.dumps(script.messages))
    full = [driver.full(script) for _ in range(10)]
    driver.digest = None
    driver.context(script)  # a full request re-syncs the driver (as after a restart)
    for _ in range(20):
        driver.turn(script)
    serve.close()
    return {
        "transcriptMiB": round(size / 2**20, 2),
        "providerTokens": driver.status["tokens"],
        "epoch": driver.status["epoch"],
        "full": latency(full),
        **deltas(driver.delta_ms[built + 1 :]),
    }


def rotation(folder: Path, turns: int) -> dict[str, Any]:
    serve = Serve(folder)
    model = {"id": "faux-1", "provider": "faux", "contextWindow": 200_000, "maxTokens": 8_192}
    driver, script = Driver(serve, "rotation", model), Script()
    for _ in range(turns):
        driver.turn(script)
    serve.close()
    rotating = [ms for ms, rotated, _ in driver.delta_ms if rotated]
    return {
        "turns": turns,
        "requests": len(driver.delta_ms),
        "rotations": len(rotating),
        "epoch": driver.status["epoch"],
        "atRotation": latency(rotating),
        **deltas(driver.delta_ms[1:]),
        "cacheReuse": cache_reuse(driver.copies),
    }


def externalized(folder: Path) -> dict[str, Any]:
    serve = Serve(folder)
    model = {"id": "big", "provider": "faux", "contextWindow": 1_000_000, "maxTokens": 32_000}
    driver, script = Driver(serve, "externalized", model, {"rotationTurns": 10_000}), Script(big_output_every=0)
    rng = random.Random(3)
    for number in range(50):
        lines = [f"{number:02d}:{n:06d} {_path(rng)} ok {rng.getrandbits(64):016x}" for n in range(10_500)]
        driver.turn(script, tools=1, output="\n".join(lines))  # ~630 KB each: a 30 MB transcript
    built = len(driver.delta_ms)
    externalizing = [ms for ms, _, _ in driver.delta_ms[1::2]]
    size = len(orjson.dumps(script.messages))
    full = [driver.full(script) for _ in range(5)]
    driver.digest = None
    driver.context(script)
    for _ in range(20):
        driver.turn(script, tools=1, output="tests passed")
    serve.close()
    return {
        "transcriptMiB": round(size / 2**20, 2),
        "providerTokens": driver.status["tokens"],
        "externalized": driver.status["externalized"],
        "full": latency(full),
        **deltas(driver.delta_ms[built + 1 :]),
        "externalizingDelta": latency(externalizing),
    }


def log_output(rng: random.Random) -> str:
    """A build or test log of 50–225 KB: timestamped lines naming paths, symbols and outcomes."""
    size, lines = rng.randint(50_000, 225_000), []
    while size > 0:
        line = f"{rng.getrandbits(32):08x} {_path(rng)}:{rng.randint(1, 900)} {_symbol(rng)} {_sentence(rng, 3, 9)}"
        lines.append(line)
        size -= len(line) + 1
    return "\n".join(lines)


def logs(folder: Path, turns: int, gap_ms: float = 0.0) -> dict[str, Any]:
    serve = Serve(folder)
    model = {"id": "faux-1", "provider": "faux", "contextWindow": 200_000, "maxTokens": 8_192}
    driver, script = Driver(serve, "logs", model), Script()
    rng = random.Random(5)
    carrying: list[int] = []  # indexes into driver.delta_ms of the deltas that carry a log
    for number in range(turns):
        script.user()
        driver.context(script)
        for call in range(script.rng.randint(1, 5)):
            log = number % 5 == 4 and call == 0
            script.tool_call(log_output(rng) if log else None)
            time.sleep(gap_ms / 1000)  # the tool ran and the host prepares the next model call
            driver.context(script)
            if log:
                carrying.append(len(driver.delta_ms) - 1)
        script.answer()
        serve.call("session-settled", {"project": PROJECT, "sessionId": driver.session})
        time.sleep(gap_ms / 1000)  # the user reads the answer and types the next message
    serve.close()
    samples = driver.delta_ms[1:]
    return {
        "turns": turns,
        "gapMs": gap_ms,
        "requests": len(driver.delta_ms),
        "logs": len(carrying),
        "everyDelta": latency([ms for ms, _, _ in samples]),
        "logDelta": latency([driver.delta_ms[i][0] for i in carrying]),
        "atRotation": latency([ms for ms, rotated, _ in samples if rotated]),
        **deltas(samples),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="turns of the rotation scenario")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", help="one scenario: no-rotation, rotation, externalized or logs")
    parser.add_argument(
        "--gap-ms", type=float, default=0.0, help="logs: a pause before each tool-result request and after each turn"
    )
    args = parser.parse_args()
    results = {}
    for name, run in (
        ("no-rotation", no_rotation),
        ("rotation", lambda f: rotation(f, args.turns)),
        ("externalized", externalized),
        ("logs", lambda f: logs(f, args.turns, args.gap_ms)),
    ):
        if args.only and name != args.only:
            continue
        with tempfile.TemporaryDirectory() as folder:
            results[name] = run(Path(folder))
        if not args.json:
            print(name, orjson.dumps(results[name]).decode(), flush=True)
    if args.json:
        print(orjson.dumps(results).decode())


if __name__ == "__main__":
    main()
