"""Worker processes for the reliability suites (tests/test_concurrency.py, tests/test_faults.py,
eval/reliability/soak.py): each opens the archive itself, as separate `cwa` processes do."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import blake3

PROJECT = "/work/faults"
QUIET = {"CWA_SEMANTIC_RETRIEVAL": "false", "CWA_DISK_CRITICAL_MEBIBYTES": "0"}


def _open(db: str):
    """The archive with QUIET settings (never by changing this process's environment: the test
    process calls this too)."""
    from cwa.api import Archive
    from cwa.config import load_settings

    return Archive.open(db, settings=load_settings(None, env={**os.environ, **QUIET}))


def document_text(writer: int, number: int) -> str:
    return (f"writer {writer} note {number}: the retry budget for service-{writer}-{number} is "
            f"{number % 7} attempts; see src/service_{writer}.py line {number}")


def stored_digest(messages: list[dict[str, Any]]) -> str:
    """blake3 of the document text the archive stores for `messages` (what `get` returns)."""
    from cwa.store.serialization import serialize_messages

    return blake3.blake3(serialize_messages(messages).text).hexdigest()


def write_for(db: str, writer: int, seconds: float) -> dict[str, Any]:
    """Admit distinct documents for `seconds`; every acknowledged id with its text digest."""
    from cwa.errors import CwaError

    archive = _open(db)
    acknowledged, errors, number = [], [], 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        messages = [{"role": "user", "text": document_text(writer, number)}]
        try:
            done = archive.admit({"project": PROJECT, "sessionId": f"writer-{writer}", "kind": "turn",
                                  "messages": messages})
            acknowledged.append((done["documentId"], stored_digest(messages)))
        except CwaError as error:
            errors.append(f"{error.code}: {error.message}")
        number += 1
    archive.close()
    return {"acknowledged": acknowledged, "errors": errors}


def read_for(db: str, reader: int, seconds: float) -> dict[str, Any]:
    """Search, preflight, recall and gather in turn for `seconds`: operations, errors, the
    longest single operation."""
    from cwa.errors import CwaError

    archive = _open(db)
    ops, errors, longest, number = 0, [], 0.0, 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        kind = ("search", "preflight", "recall", "gather")[number % 4]
        started = time.monotonic()
        try:
            if kind == "search" or kind == "recall":
                found = archive.call("search", {"project": PROJECT, "query": f"retry budget service {number % 5}",
                                                "semanticPolicy": "never"})
                if kind == "recall" and found["results"]:
                    archive.call("recall", {"project": PROJECT, "locator": found["results"][0]["locator"]})
            elif kind == "preflight":
                archive.call("preflight", {"project": PROJECT, "sessionId": f"reader-{reader}",
                                           "messageKey": f"r{reader}-{number}", "text": "what was the retry budget again?"})
            else:
                archive.call("gather", {"project": PROJECT, "query": "retry budget", "maxTokens": 800})
            ops += 1
        except CwaError as error:
            errors.append(f"{kind}: {error.code}: {error.message}")
        longest = max(longest, time.monotonic() - started)
        number += 1
    archive.close()
    return {"ops": ops, "errors": errors, "longest": longest}


def seed(db: str, documents: int, words: int = 200) -> None:
    """`documents` turns of varied words, for work that must take a while (a rebuild)."""
    import random

    archive = _open(db)
    rng = random.Random(documents)
    vocabulary = [f"term{i}" for i in range(4000)]
    for number in range(documents):
        archive.admit({"project": PROJECT, "sessionId": f"seed-{number % 10}", "kind": "turn", "messages": [
            {"role": "user", "text": f"retry budget {number} " + " ".join(rng.choice(vocabulary) for _ in range(words))},
            {"role": "assistant", "text": " ".join(rng.choice(vocabulary) for _ in range(words))}]})
    archive.close()


def verify(db: str, acknowledged: list[tuple[str, str]]) -> dict[str, Any]:
    """Integrity check, every acknowledged document present with its exact text digest, no
    duplicates, no partial (rootless) checkpoint visible."""
    checked = integrity(db)
    archive = _open(db)
    conn = archive.conn
    missing, wrong = [], []
    for document_id, digest in acknowledged:
        try:
            text = archive.get({"documentId": document_id})["text"]
        except Exception:
            missing.append(document_id)
            continue
        if blake3.blake3(text.encode()).hexdigest() != digest:
            wrong.append(document_id)
    live = conn.execute("SELECT count(*) FROM documents WHERE state = 'live' AND kind = 'turn'").fetchone()[0]
    orphans_indexed = conn.execute(
        "SELECT count(*) FROM documents d WHERE kind = 'checkpoint-part' AND index_generation IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM checkpoint_parts c WHERE c.part_row = d.id)").fetchone()[0]
    archive.close()
    return {"integrity": checked, "missing": missing, "wrong": wrong, "liveTurns": live,
            "orphanParts": orphan_count_safe(db), "orphansIndexed": orphans_indexed}


def orphan_count_safe(db: str) -> int:
    from cwa.store.checkpoint_parts import orphan_count

    archive = _open(db)
    try:
        return orphan_count(archive.conn)
    finally:
        archive.close()


def rebuilds_started(db: str) -> int:
    """Index rebuilds begun and not finished (a killed one stays unfinished)."""
    import apsw

    conn = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute("SELECT count(*) FROM index_generations WHERE reason = 'rebuild' "
                            "AND finished_at IS NULL").fetchone()[0]
    finally:
        conn.close()


def integrity(db: str) -> str:
    """PRAGMA integrity_check from a new connection (FTS5 included)."""
    import apsw

    conn = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def path_of(tmp: Path) -> str:
    return str(tmp / "archive.db")


def _acknowledge(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")
        out.flush()
        os.fsync(out.fileno())


def acknowledged_lines(path: Path) -> list[list[str]]:
    """Complete acknowledgement lines (a kill may cut the last one short)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    return [line.split() for line in text.split("\n")[:-1] if line]


def admission_request(writer: int, number: int) -> dict[str, Any]:
    return {"project": PROJECT, "sessionId": f"writer-{writer}", "kind": "turn",
            "messages": [{"role": "user", "text": document_text(writer, number)}]}


def child_admit(db: str, ack: str, writer: int, start: int) -> None:
    """Admit documents until killed; acknowledge each (id, number, digest) once admission returned."""
    archive = _open(db)
    number = start
    while True:
        request = admission_request(writer, number)
        done = archive.admit(request)
        _acknowledge(ack, f"{done['documentId']} {number} {stored_digest(request['messages'])}")
        number += 1


def checkpoint_text(cycle: int, megabytes: int = 4) -> str:
    line = f"cycle {cycle} build log line: compiling module ok\n"
    half = line * (megabytes * (1 << 20) // (2 * len(line)))
    return f"{half}FAULT-SENTINEL-{cycle}-MIDDLE\n{half}"


def child_checkpoint(db: str, ack: str, cycle: int) -> None:
    """One checkpoint of a few MB; acknowledge its root id once it returned."""
    archive = _open(db)
    done = archive.call("checkpoint", {"project": PROJECT, "sessionId": "checkpoints", "text": checkpoint_text(cycle)})
    _acknowledge(ack, f"{done['rootId']} {cycle}")
