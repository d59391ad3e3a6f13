"""`cwa import` and the client hooks: read a client's sessions and archive what is new.

Each source (a transcript file, one session of a client's database) is compared with what was
read before by a fingerprint that changes when it grows: an unchanged source is not even read.
A changed one is read whole (a last line still being written stays for the next run) and every
session in it goes through the session engine (SessionEngine.archive_history), which archives each
complete interaction group once: a re-run adds nothing, a grown transcript adds its new turns
(a group that grew supersedes its shorter archive). A source that cannot be read is named in
`problems` with its file and line and left for a later cwa; the rest goes on. A source is
recorded as read only once every session in it is archived, so a failure part-way is redone.
Writes are committed in batches (BulkWrites): a failure loses at most the batch in progress,
which the next run redoes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from cwa.capture import claude, codex, opencode, pi
from cwa.capture.transcripts import Problem, Transcript, Unit
from cwa.errors import InvalidRequest, UnsupportedFormat
from cwa.limits import MAX_VISIBLE_KEYS
from cwa.store import imports, term_counts
from cwa.store.connection import BULK_SECONDS, BulkWrites, write_transaction
from cwa.timestamps import shift

READERS: dict[str, ModuleType] = {"claude": claude, "codex": codex, "opencode": opencode, "pi": pi}
# A session quiet this long is over: its last turn is archived even if it ended mid-way (an
# interrupted answer, a prompt never answered), so an import of the past loses nothing.
OVER_AFTER_SECONDS = 3600


@dataclass
class Summary:
    host: str
    dry_run: bool
    sources: int = 0
    unchanged: int = 0
    read: int = 0
    sessions: int = 0
    messages: int = 0
    documents: int = 0  # turn documents archived by this run
    older: int = 0  # sessions before --since
    bytes: int = 0  # bytes of the sources read
    problems: list[Problem] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "dryRun": self.dry_run,
            "sources": self.sources,
            "unchanged": self.unchanged,
            "read": self.read,
            "sessions": self.sessions,
            "messages": self.messages,
            "documents": self.documents,
            "olderThanSince": self.older,
            "bytes": self.bytes,
            "problems": [p.to_json() for p in self.problems],
        }


def default_path(host: str, env: dict[str, str]) -> Path:
    return READERS[host].default_root(env)


def sources(host: str, paths: list[Path], env: dict[str, str]) -> list[Unit]:
    """The units to compare: of the paths given, else of the client's store at its default place
    (none when it does not exist)."""
    reader = READERS[host]
    found: list[Unit] = []
    for path in paths or [reader.default_root(env)]:
        if not path.exists():
            if paths:
                raise InvalidRequest(f"{path} does not exist", field="path", reason="not-found")
            continue
        found.extend(reader.units(path))
    return found


def project_of(transcript: Transcript, project: str | None) -> str | None:
    """The identity Pi and MCP use: the real path of the session's working directory."""
    if project:
        return project
    return os.path.realpath(transcript.cwd) if transcript.cwd else None


def import_sources(
    archive: Any,
    host: str,
    units: list[Unit],
    *,
    since: str | None = None,
    project: str | None = None,
    dry_run: bool = False,
    progress: Callable[[int], None] = lambda _bytes: None,
    committed: Callable[[], None] | None = None,
) -> Summary:
    """`committed` runs after each batch commits, in the next one's transaction (BulkWrites)."""
    summary = Summary(host, dry_run, sources=len(units))
    with BulkWrites(archive.conn, BULK_SECONDS, committed) as batch:
        for unit in units:
            try:
                if imports.fingerprint(archive.conn, unit.source) == unit.fingerprint:
                    summary.unchanged += 1
                    continue
                try:
                    transcripts, problems = unit.load()
                except UnsupportedFormat as exc:
                    summary.problems.extend(_problems(exc, unit))
                    continue
                summary.read += 1
                summary.bytes += unit.size
                summary.problems.extend(problems)
                _archive_unit(archive, host, unit, transcripts, summary, since, project, dry_run, batch.due)
            finally:
                progress(unit.size)
            batch.due()
    return summary


def keep_common_terms(archive: Any, summary: Summary) -> int:
    """After `cwa import` archived turns: keep every common term's window count, as a maintenance
    pass does (cwa/store/term_counts.py), so whatever next searches the imported history (a hook,
    `cwa call`, an MCP server) counts none in a user's turn; how many were kept. Nothing to do
    unless the archive has grown by a tenth since they were last kept. Hooks do not call it: they
    archive a turn or two, and a serve keeps them as it starts."""
    if not summary.documents:  # a dry run archives none
        return 0
    return term_counts.refresh(archive.conn)


def _problems(exc: UnsupportedFormat, unit: Unit) -> list[Problem]:
    found = exc.details.get("problems") or [
        {"file": unit.source, "line": None, "reason": "unreadable", "detail": exc.message}
    ]
    return [Problem(p["file"], p["line"], p["reason"], p["detail"]) for p in found]


def _archive_unit(
    archive: Any,
    host: str,
    unit: Unit,
    transcripts: list[Transcript],
    summary: Summary,
    since: str | None,
    project: str | None,
    dry_run: bool,
    after_group: Callable[[], None],
) -> None:
    archived: list[tuple[str, Transcript, list[str]]] = []  # (project, transcript, message keys)
    count, complete = 0, True  # complete: every session of the unit archived (else it is read again)
    for transcript in transcripts:
        if not transcript.messages:
            continue
        if since and (transcript.updated or "") < since:
            summary.older += 1
            complete = False
            continue
        identity = project_of(transcript, project)
        if identity is None:
            summary.problems.append(
                Problem(unit.source, None, "no-working-directory", f"session {transcript.session_id}")
            )
            complete = False
            continue
        summary.sessions += 1
        summary.messages += len(transcript.messages)
        count += len(transcript.messages)
        if dry_run:
            continue
        over = transcript.settled or (transcript.updated or "") < shift(archive.clock(), -OVER_AFTER_SECONDS)
        try:
            documents, keys = archive.engines.history(
                identity, transcript.session_id, transcript.parent_id, transcript.messages, over, after_group
            )
        except InvalidRequest as exc:  # a message the engine refuses: nothing of this session was written
            summary.problems.append(
                Problem(unit.source, None, "bad-message", f"{transcript.session_id}: {exc.message}")
            )
            return
        summary.documents += len(documents)
        archived.append((identity, transcript, keys))
    if dry_run or not complete or not archived:  # nothing archived yet: read again next time
        return
    # recorded under its main line (a subagent's own file: its session), with the keys the client
    # still shows of the main line, which a hint for it must not repeat
    identity, main, keys = next((a for a in archived if not a[1].subagent), archived[0])
    visible = [] if main.subagent else keys[main.visible_from :][-MAX_VISIBLE_KEYS:]
    with write_transaction(archive.conn):
        imports.record(
            archive.conn,
            imports.SourceRead(unit.source, host, identity, main.session_id, unit.fingerprint, count, visible),
            archive.clock(),
        )
