"""What a client's hook runs: `python -m cwa.hook_client [--db FILE] claude|codex|opencode [PAYLOAD]`.

It reads the event (JSON on stdin, or Codex's notify PAYLOAD), hands it to the archive's hook
server (cwa/capture/hook_server.py) over a Unix socket, starting the server when none answers, and
prints the answer (a hint for the client's prompt) or nothing. It loads no more than Python's own
library, so a hook costs tens of milliseconds; the server keeps cwa loaded. It always exits 0: a
client is never held up or broken by cwa. What fails is logged beside the archive (`cwa doctor`).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cwa.archive_path import default_archive_path
from cwa.child_process import module_command
from cwa.vocabulary import HOOK_HOSTS

HOSTS = HOOK_HOSTS
PROMPT_EVENTS = frozenset({"UserPromptSubmit", "prompt"})  # Claude Code's and Codex's, the OpenCode plugin's
PROMPT_SECONDS = 10  # the longest a prompt waits for its hint (the clients' own hook timeouts are longer)
ARCHIVE_SECONDS = 90
START_SECONDS = 15  # a new server loads cwa and opens the archive
# what the client's environment tells the server (which may have started under another client's)
FORWARDED = ("CWA_PROJECT", "HOME", "CODEX_HOME", "XDG_DATA_HOME", "CLAUDE_CONFIG_DIR")


def event_name(event: dict) -> object:
    """Claude Code's and Codex's `hook_event_name`, Codex notify's `type`, the plugin's `event`."""
    return event.get("hook_event_name") or event.get("type") or event.get("event")


def socket_path(db: Path) -> Path:
    """A private folder of this user's (XDG_RUNTIME_DIR, else the temp dir), one socket per archive."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    folder = Path(base) / f"cwa-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    if folder.stat().st_uid != os.getuid() or folder.stat().st_mode & 0o077:
        raise PermissionError(f"{folder} is not private to this user")
    digest = hashlib.sha256(os.path.abspath(db).encode()).hexdigest()[:20]
    return folder / f"hooks-{digest}.sock"


def _exchange(path: Path, request: bytes, seconds: float) -> dict | None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(seconds)
        conn.connect(str(path))
        conn.sendall(request)
        chunks = []
        while not chunks or not chunks[-1].endswith(b"\n"):
            chunk = conn.recv(1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    reply = json.loads(b"".join(chunks)) if chunks else {}
    return reply.get("answer") if isinstance(reply, dict) else None


def _start_server(db: Path, path: Path) -> None:
    subprocess.Popen(
        module_command("cwa", "--db", str(db), "hook-server", "--socket", str(path)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # outlives this hook and the client's process group
    )


def deliver(db: Path, host: str, event: dict, seconds: float) -> dict | None:
    path = socket_path(db)
    env = {k: os.environ[k] for k in FORWARDED if k in os.environ}
    request = json.dumps({"host": host, "event": event, "env": env}).encode() + b"\n"
    try:
        return _exchange(path, request, seconds)
    except (FileNotFoundError, ConnectionRefusedError):
        _start_server(db, path)
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            return _exchange(path, request, seconds)
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the hook server of {db} did not start within {START_SECONDS} s") from None
            time.sleep(0.05)


def main(argv: list[str]) -> int:
    db = default_archive_path()
    if len(argv) >= 2 and argv[0] == "--db":
        db, argv = Path(argv[1]), argv[2:]
    if not argv or argv[0] not in HOSTS:
        print(f"usage: python -m cwa.hook_client [--db FILE] {'|'.join(HOSTS)} [PAYLOAD]", file=sys.stderr)
        return 0
    host, payload = argv[0], argv[1] if len(argv) > 1 else None
    name = None
    try:
        event = json.loads(payload if payload is not None else sys.stdin.buffer.read())
        if not isinstance(event, dict):
            raise ValueError("the hook input is not a JSON object")
        name = event_name(event)
        seconds = PROMPT_SECONDS if name in PROMPT_EVENTS else ARCHIVE_SECONDS
        answer = deliver(Path(os.path.abspath(db)), host, event, seconds)
        if answer is not None:
            sys.stdout.write(json.dumps(answer) + "\n")
    except Exception as exc:  # a hook never breaks its client
        from cwa import hook_failures  # only on failure: a hook's start stays light

        hook_failures.failed(db, host, name, "hook-unanswered", f"{type(exc).__name__}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
