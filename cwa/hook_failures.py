"""What a client hook could not do, kept beside the archive for `cwa doctor`.

A hook never fails its client (Claude Code, Codex, OpenCode go on whatever cwa does), so a
failure is written here instead: `<archive>.hooks.log`, one JSON line per failure, the newest
MAX_LINES kept. It is a file, not a table, so that a failure to open the archive is recorded too.
`cwa doctor` reports it; `cwa doctor --repair` clears it. Hooks fail side by side (a client runs
several at once, the hook server beside a hook that could not reach it): each line is appended
under a lock on the file, and the file is cut back to MAX_LINES in place under the same lock, so
no writer's line is lost to another's.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Any

import orjson

MAX_LINES = 200
TRIM_BYTES = 256 * 1024  # past this the file is cut back to its newest MAX_LINES lines


def log_path(archive: Path) -> Path:
    return archive.with_name(archive.name + ".hooks.log")


def failed(archive: Path, host: str, event: object, code: str, message: str) -> None:
    """Log one failure of a hook (never raising: with nowhere to write, the client still goes on)."""
    at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".000Z"
    entry = {
        "at": at,
        "host": host,
        "event": event if isinstance(event, str) else None,
        "code": code,
        "message": message,
    }
    try:
        record(archive, entry)
    except OSError:
        pass


def record(archive: Path, entry: dict[str, Any]) -> None:
    fd = os.open(log_path(archive), os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "r+b") as log:
        fcntl.flock(log, fcntl.LOCK_EX)  # released as the file closes
        log.write(orjson.dumps(entry) + b"\n")
        log.flush()
        if os.fstat(fd).st_size > TRIM_BYTES:
            log.seek(0)
            kept = log.read().splitlines(keepends=True)[-MAX_LINES:]
            log.truncate(0)
            log.write(b"".join(kept))  # appended: the file is empty


def recent(archive: Path) -> list[dict[str, Any]]:
    try:
        raw = log_path(archive).read_bytes()
    except OSError:
        return []
    found = []
    for line in raw.splitlines():
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found[-MAX_LINES:]


def clear(archive: Path) -> None:
    log_path(archive).unlink(missing_ok=True)
