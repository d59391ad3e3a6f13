"""The hint ledger: one frozen preflight decision per (session, user-message key).

A record holds exactly the bytes that were inserted after the message (possibly none) and is
replayed verbatim on every later call for that key, whatever has been admitted or rebuilt since.
Records idle for IDLE_DAYS (not replayed, not counted as active) are reclaimed by maintenance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import apsw
import orjson

from cwa.store.sqlfiles import queries
from cwa.timestamps import shift

IDLE_DAYS = 30
TOUCH_INTERVAL_SECONDS = 86_400  # `last_active_at` is rewritten at most once a day


def session_row(conn: apsw.Connection, project: str, session_key: str) -> int | None:
    row = conn.execute(queries("hints")["session_row"], (project, session_key)).fetchone()
    return row[0] if row else None


@dataclass(frozen=True)
class Frozen:
    text: str  # exactly the model-visible bytes
    response: dict[str, Any]  # hints and diagnostics as first returned
    last_active_at: str

    def stale(self, now: str) -> bool:
        """Activity older than TOUCH_INTERVAL_SECONDS: worth writing down again."""
        return self.last_active_at < shift(now, -TOUCH_INTERVAL_SECONDS)


def find_hint(conn: apsw.Connection, session: int, message_key: str) -> Frozen | None:
    """The frozen decision for a key, or None."""
    row = conn.execute(queries("hints")["find_hint"], (session, message_key)).fetchone()
    if row is None:
        return None
    return Frozen(row[0], orjson.loads(row[1]), row[2])


def record_hint(conn: apsw.Connection, session: int, message_key: str, record: dict[str, Any], now: str) -> int:
    conn.execute(
        queries("hints")["insert_hint"],
        {
            "session": session,
            "key": message_key,
            "query_hash": record["queryHash"],
            "generation": record["generation"],
            "outcome": record["outcome"],
            "reason": record["reason"],
            "text": record["text"],
            "tokens": record["tokens"],
            "source": record["source"],
            "response": orjson.dumps(record["response"]).decode(),
            "now": now,
        },
    )
    return conn.last_insert_rowid()


def find_in_lineage(conn: apsw.Connection, lineage: list[int], message_key: str) -> Frozen | None:
    """The frozen decision for a key in the session or its nearest ancestor (a fork replays the
    hints its parent froze for the messages they share)."""
    params = {"sessions": orjson.dumps(lineage).decode(), "key": message_key}
    row = conn.execute(queries("hints")["lineage_hint"], params).fetchone()
    return Frozen(row[0], orjson.loads(row[1]), row[2]) if row else None


def frozen_keys(conn: apsw.Connection, lineage: list[int], keys: list[str]) -> set[str]:
    """The keys among `keys` with a frozen decision in the session or an ancestor: messages an
    engine has seen before."""
    if not keys:
        return set()
    params = {"sessions": orjson.dumps(lineage).decode(), "keys": orjson.dumps(keys).decode()}
    return {row[0] for row in conn.execute(queries("hints")["frozen_keys"], params)}


def active_tokens(conn: apsw.Connection, lineage: list[int], keys: list[str]) -> int:
    """Tokens of the frozen hints of `keys` across the session and its ancestors."""
    if not keys:
        return 0
    params = {"sessions": orjson.dumps(lineage).decode(), "keys": orjson.dumps(keys).decode()}
    return conn.execute(queries("hints")["active_tokens"], params).fetchone()[0]


def touch_active(conn: apsw.Connection, session: int, keys: list[str], now: str) -> None:
    if keys:
        params = {
            "session": session,
            "keys": orjson.dumps(keys).decode(),
            "now": now,
            "stale": shift(now, -TOUCH_INTERVAL_SECONDS),
        }
        conn.execute(queries("hints")["touch_active"], params)


def explain(conn: apsw.Connection, session: int, message_key: str | None) -> tuple[str, dict[str, Any]] | None:
    """(message key, stored response) of one key, or of the session's latest decision."""
    if message_key is not None:
        frozen = find_hint(conn, session, message_key)
        return (message_key, frozen.response) if frozen else None
    row = conn.execute(queries("hints")["latest_hint"], (session,)).fetchone()
    return (row[0], orjson.loads(row[1])) if row else None


def reclaim_idle(conn: apsw.Connection, now: str, limit: int) -> int:
    """Delete at most `limit` records idle for IDLE_DAYS; their exposures stay (hint_id → NULL)."""
    sql = queries("hints")
    ids = [r[0] for r in conn.execute(sql["idle_hints"], (shift(now, -IDLE_DAYS * 86_400), limit))]
    conn.executemany(sql["delete_hint"], [(i,) for i in ids])
    return len(ids)
