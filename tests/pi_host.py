"""A real Pi process in RPC mode for tests: a temporary HOME, the test-only faux model
(tests/pi/faux.ts) and the cwa extension, driven by JSON lines (../shared/PI.md).

Pi 1.6.0 and Node 22 come from the npm registry into REPO/.cache/pi (`.ci/install-tools`).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import DISK_GUARD_OFF, REPO

PI_BIN = REPO / ".cache" / "pi" / "node_modules" / ".bin"
FAUX = REPO / "tests" / "pi" / "faux.ts"
EXTENSION = REPO / "cwa" / "integrations" / "pi" / "extension.ts"
CWA = Path(sys.executable).parent / "cwa"


def pi_installed() -> bool:
    return (PI_BIN / "pi").exists() and (PI_BIN / "node").exists()


def pi_env(root: Path, **settings: str) -> dict[str, str]:
    """A hermetic environment: HOME, config and data under `root`, Pi's Node first on PATH."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CWA_")}
    env.update(DISK_GUARD_OFF)
    env.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "PATH": f"{PI_BIN}{os.pathsep}{env.get('PATH', '')}",
            "CWA_DB": str(root / "archive.db"),
            "CWA_EXECUTABLE": str(CWA),
            "CWA_TEST_PI_DIR": str(root),
            "CWA_SEMANTIC_RETRIEVAL": "false",  # the embedding model is exercised elsewhere; keeps turns fast
        }
    )
    env.update(settings)
    return env


class Pi:
    """`pi --mode rpc` with the faux model and the cwa extension; every stdout line is kept."""

    def __init__(
        self,
        root: Path,
        env: dict[str, str],
        *,
        extensions: tuple[Path, ...] = (FAUX, EXTENSION),
        args: tuple[str, ...] = ("--no-session",),
        discover: bool = False,
    ) -> None:
        self.root = root
        self.work = root / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        # -ne: no extension discovery (only -e); `discover` lets Pi load those its settings name
        command = [
            str(PI_BIN / "pi"),
            "--mode",
            "rpc",
            *args,
            "--offline",
            *(() if discover else ("-ne",)),
            "-nc",
            "-ns",
            "-np",
            "--provider",
            "faux",
            "--model",
            "faux-1",
        ]
        for extension in extensions:
            command += ["-e", str(extension)]
        self.process = subprocess.Popen(
            command, cwd=self.work, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.events: list[dict[str, Any]] = []
        self.stderr = b""
        threading.Thread(target=self._read, daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()
        self._next = 0

    def _read(self) -> None:
        for raw in self.process.stdout:
            try:
                self.lines.put(json.loads(raw))
            except ValueError:
                self.lines.put({"type": "unparsed", "line": raw.decode(errors="replace")})
        self.lines.put(None)

    def _read_stderr(self) -> None:
        self.stderr = self.process.stderr.read()

    def send(self, message: dict[str, Any]) -> None:
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no matching line in {timeout} s; last: {self.events[-3:]}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise EOFError(f"pi ended (stderr: {self.stderr[-2000:]!r})")
            self.events.append(line)
            if predicate(line):
                return line

    def command(self, kind: str, timeout: float = 120, **fields: Any) -> dict[str, Any]:
        self._next += 1
        ident = f"t{self._next}"
        self.send({"type": kind, "id": ident, **fields})
        return self.wait_for(lambda line: line.get("type") == "response" and line.get("id") == ident, timeout)

    def prompt(self, message: str, timeout: float = 180) -> list[dict[str, Any]]:
        """One whole turn: the lines from the prompt to its `agent_settled`."""
        start = len(self.events)
        answer = self.command("prompt", message=message)
        assert answer["success"], answer
        self.wait_for(lambda line: line.get("type") == "agent_settled", timeout)
        return self.events[start:]

    def window(self, args: str = "", timeout: float = 60) -> str:
        """Run `/window ARGS`; the text it shows (a notification)."""
        start = len(self.events)
        answer = self.command("prompt", message=f"/window {args}".rstrip())
        assert answer["success"] and answer["data"]["disposition"] == "handled", answer
        shown = [e for e in self.events[start:] if e.get("method") == "notify"]
        if not shown:
            shown = [self.wait_for(lambda line: line.get("method") == "notify", timeout)]
        return shown[-1]["message"]

    def statuses(self) -> list[str]:
        return [
            e.get("statusText") or ""
            for e in self.events
            if e.get("type") == "extension_ui_request" and e.get("method") == "setStatus"
        ]

    def notices(self) -> list[str]:
        return [
            e.get("message") or ""
            for e in self.events
            if e.get("type") == "extension_ui_request" and e.get("method") == "notify"
        ]

    def requests(self) -> list[list[dict[str, Any]]]:
        """Every provider request the faux model received, in order (its messages)."""
        path = self.root / "requests.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def close(self, timeout: float = 60) -> int:
        self.process.stdin.close()
        code = self.process.wait(timeout)
        self._stderr_reader.join(10)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


def children(pid: int) -> list[int]:
    """Direct child processes of `pid` (from /proc); the browse tests use it too."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def serve_processes(archive: Path) -> list[int]:
    """The running `cwa serve` processes whose environment names `archive` (`CWA_DB`): the ones a
    test started, even once their parent is gone, and never another test's or a user's."""
    wanted = b"CWA_DB=" + str(archive).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if not (b"serve" in argv and any(part.endswith(b"cwa") for part in argv)):
                continue
            environment = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted in environment:
            found.append(int(entry.name))
    return found
