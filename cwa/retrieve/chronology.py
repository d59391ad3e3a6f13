"""A session's messages in the order they were written: the records gather and traverse return.

A record is one message of one archived document. Chronology is the order of document creation
time, then document row, then message ordinal, within one session; checkpoint parts are left out
(their root stands for the archived input). Records of expired or tombstoned documents keep their
place (a traversal counts them as scanned) but carry no text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import apsw

from cwa.store.reads import read_bytes
from cwa.store.sqlfiles import queries
from cwa.vocabulary import READABLE_STATES


@dataclass(frozen=True)
class Record:
    row: int
    document_id: str
    version: int
    kind: str
    created_at: str
    state: str
    session_row: int
    session: str
    project: str
    subject: str | None
    ordinal: int
    key: str
    role: str
    timestamp: str | None
    text_start: int
    end: int

    @property
    def position(self) -> tuple[str, int, int]:
        return (self.created_at, self.row, self.ordinal)

    @property
    def readable(self) -> bool:
        return self.state in READABLE_STATES

    @property
    def size(self) -> int:
        return self.end - self.text_start

    def text(self, conn: apsw.Connection, start: int | None = None, end: int | None = None) -> tuple[str, int, int]:
        """The message text, or the part of it in the byte range [start, end), moved inward to
        whole characters: (text, start, end)."""
        start = self.text_start if start is None else start
        end = self.end if end is None else end
        data, _ = read_bytes(conn, self.row, start, end)
        head = 0
        while head < len(data) and start + head > self.text_start and (data[head] & 0xC0) == 0x80:
            head += 1  # inside a character that began before the range
        tail = len(data)
        for back in range(1, min(4, tail - head) + 1):  # a character cut at the end of the range
            lead = data[tail - back]
            if lead & 0xC0 != 0x80:
                width = 4 if lead >= 0xF0 else 3 if lead >= 0xE0 else 2 if lead >= 0xC0 else 1
                if width > back and end < self.end:
                    tail -= back
                break
        return data[head:tail].decode("utf-8", errors="replace"), start + head, start + tail

    def identity(self) -> dict[str, Any]:
        return {
            "documentId": self.document_id,
            "version": self.version,
            "kind": self.kind,
            "createdAt": self.created_at,
            "sessionId": self.session,
            "role": self.role,
            "messageKey": self.key,
            "ordinal": self.ordinal,
        }


def record_at(conn: apsw.Connection, document_row: int, ordinal: int) -> Record | None:
    row = conn.execute(queries("chronology")["record_at"], {"row": document_row, "ordinal": ordinal}).fetchone()
    return Record(*row) if row else None


def records_from(
    conn: apsw.Connection, session_row: int, position: tuple[str, int, int], direction: str, limit: int
) -> list[Record]:
    """Up to `limit` records of the session strictly before or after `position`, nearest first."""
    created, row, ordinal = position
    found = conn.execute(
        queries("chronology")[f"records_{direction}"],
        {"session": session_row, "created": created, "row": row, "ordinal": ordinal, "limit": limit},
    )
    return [Record(*r) for r in found]


def parent_session(conn: apsw.Connection, session_row: int) -> int | None:
    """The session's recorded parent (its verified lineage), or None."""
    row = conn.execute(queries("chronology")["parent_session"], (session_row,)).fetchone()
    return row[0] if row else None


def same_subject(conn: apsw.Connection, record: Record) -> list[dict[str, Any]]:
    """Other readable documents of the project under the record's subject key."""
    if record.subject is None:
        return []
    found = conn.execute(queries("chronology")["same_subject"], {"row": record.row, "subject": record.subject})
    return [{"documentId": d, "version": v} for d, v in found]
