"""What the session engine keeps in the archive to rebuild the same provider copy.

- the epoch row: epoch number, the key where the provider copy starts, and flags;
- one decision per message the engine showed differently (or decided to keep inline);
- the interaction groups already archived as turn documents.

Decisions and archived groups are read across the session's lineage, so a fork starts from what
its parent decided for the messages they share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import apsw
import orjson

from cwa.store.sqlfiles import queries


@dataclass
class EpochRow:
    epoch: int = 1
    cut_key: str | None = None
    flags: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Replacement:
    action: str  # inline | preview | duplicate | oversized
    document_id: str | None
    text: str | None  # the provider copy's text; None keeps the message as the host sent it
    tokens: int
    epoch: int


def load_epoch(conn: apsw.Connection, lineage: list[int]) -> EpochRow | None:
    """The nearest epoch row along the lineage (a fork starts from its parent's)."""
    for session in lineage:
        row = conn.execute(queries("session")["find_epoch"], (session,)).fetchone()
        if row:
            return EpochRow(row[0], row[1], orjson.loads(row[2]))
    return None


def save_epoch(conn: apsw.Connection, session: int, row: EpochRow, now: str) -> None:
    """The session's current epoch; a new one is also logged where it began (`session_epoch_log`)."""
    sql = queries("session")
    conn.execute(
        sql["save_epoch"],
        {
            "session": session,
            "epoch": row.epoch,
            "cut": row.cut_key,
            "flags": orjson.dumps(row.flags, option=orjson.OPT_SORT_KEYS).decode(),
            "now": now,
        },
    )
    if row.epoch > 1:
        reason = row.flags.get("reason") or ("compaction" if row.flags.get("compactionKey") else None)
        conn.execute(
            sql["log_epoch"], {"session": session, "epoch": row.epoch, "cut": row.cut_key, "reason": reason, "now": now}
        )


def load_replacements(conn: apsw.Connection, lineage: list[int], keys: list[str]) -> dict[str, Replacement]:
    if not keys:
        return {}
    found: dict[str, Replacement] = {}
    params = {"sessions": orjson.dumps(lineage).decode(), "keys": orjson.dumps(keys).decode()}
    for key, action, document_id, text, tokens, epoch in conn.execute(
        queries("session")["lineage_replacements"], params
    ):
        found.setdefault(key, Replacement(action, document_id, text, tokens, epoch))
    return found


def save_replacement(
    conn: apsw.Connection,
    session: int,
    key: str,
    decision: Replacement,
    version: int | None,
    now: str,
    *,
    update: bool = False,
) -> None:
    conn.execute(
        queries("session")["update_replacement" if update else "insert_replacement"],
        {
            "session": session,
            "key": key,
            "action": decision.action,
            "document": decision.document_id,
            "version": version,
            "text": decision.text,
            "tokens": decision.tokens,
            "epoch": decision.epoch,
            "now": now,
        },
    )


def archived_groups(conn: apsw.Connection, lineage: list[int]) -> set[tuple[str, str]]:
    """(first key, last key) of every group already archived along the lineage."""
    return {
        (r[0], r[1]) for r in conn.execute(queries("session")["archived_groups"], (orjson.dumps(lineage).decode(),))
    }


def previous_turn(conn: apsw.Connection, lineage: list[int], first_key: str) -> list[str]:
    """Document ids of the latest archive of the group that starts at `first_key` (none: [])."""
    row = conn.execute(
        queries("session")["previous_turn"], {"sessions": orjson.dumps(lineage).decode(), "key": first_key}
    ).fetchone()
    return orjson.loads(row[0]) if row else []


def record_turn(conn: apsw.Connection, session: int, first: str, last: str, documents: list[str], now: str) -> None:
    record_turns(conn, session, [(first, last)], documents, now)


def record_turns(
    conn: apsw.Connection, session: int, marks: list[tuple[str, str]], documents: list[str], now: str
) -> None:
    """Groups (first key, last key) archived together in `documents`."""
    encoded = orjson.dumps(documents).decode()
    conn.executemany(queries("session")["insert_turn"], [(session, first, last, encoded, now) for first, last in marks])


def document_in_project(conn: apsw.Connection, document_id: str, project: str) -> bool:
    return conn.execute(queries("session")["document_in_project"], (document_id, project)).fetchone() is not None
