"""What a client hook could not do, kept beside the archive for `cwa doctor`.

A hook never fails its client (Claude Code, Codex, OpenCode go on whatever cwa does), so a
failure is written here instead: `<archive>.hooks.log`, one JSON line per failure, the newest
MAX_LINES kept. It is a file, not a table, so that a failure to open the archive is recorded too.
`cwa doctor` reports it; `cwa doctor --repair` clears it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import orjson

MAX_LINES = 200


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
    path = log_path(archive)
    lines = recent(archive)[-(MAX_LINES - 1) :] + [entry]
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    os.replace(tmp, path)


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
    return found


def clear(archive: Path) -> None:
    log_path(archive).unlink(missing_ok=True)
