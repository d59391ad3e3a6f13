"""What `cwa import` and the client hooks have read of other agents' session stores.

One row per source (a transcript file, or one session of a client's database): the fingerprint
that changes when it grows, so a re-run skips what is unchanged without reading it, and the keys
of the messages still in the client's live context (since its latest compaction), which a hint
for that session must not repeat.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw
import orjson

from cwa.store.sqlfiles import queries


@dataclass(frozen=True)
class SourceRead:
    source: str
    host: str
    project: str
    session_key: str
    fingerprint: str
    messages: int
    visible_keys: list[str]


def fingerprint(conn: apsw.Connection, source: str) -> str | None:
    row = conn.execute(queries("imports")["fingerprint"], (source,)).fetchone()
    return row[0] if row else None


def record(conn: apsw.Connection, read: SourceRead, now: str) -> None:
    conn.execute(
        queries("imports")["record"],
        {
            "source": read.source,
            "host": read.host,
            "project": read.project,
            "session_key": read.session_key,
            "fingerprint": read.fingerprint,
            "messages": read.messages,
            "visible_keys": orjson.dumps(read.visible_keys).decode(),
            "now": now,
        },
    )


def visible_keys(conn: apsw.Connection, project: str, session_key: str) -> list[str]:
    row = conn.execute(queries("imports")["visible_keys"], (project, session_key)).fetchone()
    return orjson.loads(row[0]) if row else []
