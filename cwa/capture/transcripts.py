"""What every client reader yields: a session's messages in Pi's shapes, with where they came from.

A reader turns one source (a transcript file, one session of a client's database) into one or
more `Transcript`s: the main line, and each subagent (Claude Code's sidechains, OpenCode's child
sessions) as a session of its own whose parent is the main one. Messages use Pi's roles and
blocks (cwa/session/transcript.py), so the engine derives the same keys, groups and texts for
every client. A line the reader does not know becomes a `Problem`, named by file and line.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from cwa.errors import UnsupportedFormat
from cwa.timestamps import parse_timestamp


@dataclass(frozen=True)
class Problem:
    source: str
    line: int | None
    reason: str  # unknown-type | bad-json | unreadable | no-working-directory | ...
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"file": self.source, "line": self.line, "reason": self.reason, "detail": self.detail}


@dataclass
class Transcript:
    host: str
    session_id: str
    parent_id: str | None
    cwd: str | None
    messages: list[dict[str, Any]] = field(default_factory=list)
    settled: bool = False  # the client finished the last turn (its group is complete)
    updated: str | None = None  # the latest timestamp seen
    visible_from: int = 0  # index of the first message still in the client's context (after compaction)
    subagent: bool = False  # a subagent's line, kept apart from the main one


@dataclass(frozen=True)
class Unit:
    """What a re-run compares before reading: a transcript file, or one session of a client's
    database. `load` reads it: its sessions and the lines it could not read."""

    source: str  # a file's real path, or "<database>#<session id>"
    fingerprint: str  # changes when the source grows
    size: int  # bytes, for progress
    load: Callable[[], tuple[list[Transcript], list[Problem]]]


def file_unit(path: Path, read: Callable[[Path], tuple[list[Transcript], list[Problem]]]) -> Unit:
    stat = path.stat()
    return Unit(os.path.realpath(path), f"{stat.st_size}:{stat.st_mtime_ns}", stat.st_size, lambda: read(path))


def read_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) of every complete line of a JSON-lines file: a last line still being
    written stays for the next run. A broken line before the end is refused
    (`unsupported-format` naming it): the transcript is not imported in part."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UnsupportedFormat(
            f"cannot read {path}: {exc.strerror or exc}",
            problems=[Problem(str(path), None, "unreadable", str(exc)).to_json()],
        ) from exc
    complete = data[: data.rfind(b"\n") + 1]
    lines = []
    for number, raw in enumerate(complete.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            problem = Problem(str(path), number, "bad-json", str(exc))
            raise UnsupportedFormat(f"{path}:{number} is not a JSON line", problems=[problem.to_json()]) from exc
        if not isinstance(value, dict):
            problem = Problem(str(path), number, "not-an-object", type(value).__name__)
            raise UnsupportedFormat(f"{path}:{number} is not a JSON object", problems=[problem.to_json()])
        lines.append((number, value))
    return lines


def turn_over(messages: list[dict[str, Any]]) -> bool:
    """Whether the client's last turn is over: its last message is an answer that called no tool
    (and was not cut off), or a summary it wrote (a compaction)."""
    last = messages[-1] if messages else None
    if last is None:
        return False
    if last.get("role") in ("compactionSummary", "branchSummary"):
        return True
    return last.get("role") == "assistant" and last.get("stopReason") not in ("toolUse", "error", "aborted")


def stamp_of(value: Any) -> str | None:
    """A message time as the archive writes it (ISO-8601 text or epoch milliseconds), or None."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    try:
        return parse_timestamp(value)
    except ValueError:
        return None


def later(first: str | None, second: str | None) -> str | None:
    """The later of two canonical timestamps (None when neither is known)."""
    return max(t for t in (first, second) if t) if first or second else None
