"""Derived-index handlers and the index generations that record what each one did.

Admission commits the canonical rows and the handlers' rows in one transaction, but each
handler runs inside its own SAVEPOINT: a handler that gives up (or fails) rolls back only its
own rows and records `skipped`, a handler that ran out of its work budget keeps what it wrote and
records `partial`, and the canonical document commits either way. The built-in handlers are
exact anchors, the lexical windows (FTS5) and structural cues; `cwa index rebuild` reruns them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import apsw

from cwa.store.serialization import SerializedDocument
from cwa.store.sqlfiles import queries


@dataclass(frozen=True)
class IndexTarget:
    """What a handler may index: one admitted document, canonical rows already inserted."""

    document_row: int
    kind: str
    document: SerializedDocument


@dataclass(frozen=True)
class HandlerResult:
    outcome: str  # complete | partial | skipped
    detail: str | None = None


class IndexHandler(Protocol):
    name: str

    def index(self, conn: apsw.Connection, target: IndexTarget) -> HandlerResult: ...


def default_handlers() -> tuple[IndexHandler, ...]:
    """The handlers every admission and rebuild runs, in order."""
    from cwa.index.exact import ExactHandler
    from cwa.index.lexical import LexicalHandler
    from cwa.index.structure import StructuralHandler

    return (ExactHandler(), LexicalHandler(), StructuralHandler())


def run_handlers(
    conn: apsw.Connection,
    handlers: Sequence[IndexHandler],
    generation_id: int,
    target: IndexTarget,
) -> dict[str, str]:
    """Run each handler in its own savepoint and record its outcome; return name → outcome."""
    sql = queries("admission")
    outcomes: dict[str, str] = {}
    for handler in handlers:
        savepoint = f"handler_{len(outcomes)}"
        conn.execute(f"SAVEPOINT {savepoint}")
        try:
            result = handler.index(conn, target)
            if result.outcome not in ("complete", "partial", "skipped"):
                raise ValueError(f"handler {handler.name} returned outcome {result.outcome!r}")
            if result.outcome == "skipped":
                conn.execute(f"ROLLBACK TO {savepoint}")  # a skipped handler publishes nothing
        except Exception as exc:  # a failing handler must never cost the canonical document
            conn.execute(f"ROLLBACK TO {savepoint}")
            result = HandlerResult("skipped", f"error: {type(exc).__name__}: {exc}"[:1000])
        conn.execute(f"RELEASE {savepoint}")
        conn.execute(
            sql["insert_outcome"],
            (generation_id, target.document_row, handler.name, result.outcome, result.detail),
        )
        outcomes[handler.name] = result.outcome
    return outcomes
