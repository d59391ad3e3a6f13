"""A session's footer facts read from the archive alone, writing nothing: the recorded epoch and
flags, and, given the host's transcript, its turns and tokens since the epoch began, each message
counted as its recorded decision shows it (a message no engine has decided yet counts as sent).

The session engine computes the same facts as it decides (`SessionEngine.status`); this is for a
process that does not serve the session, such as `cwa session status --file`.
"""

from __future__ import annotations

from typing import Any

import apsw

from cwa.config import Settings
from cwa.errors import NotFound
from cwa.session import budget as budgets
from cwa.session.budget import Budget
from cwa.session.transcript import entries_of, hint_tokens, unique_keys
from cwa.store import hint_ledger, session_state
from cwa.store.session_state import EpochRow
from cwa.store.sessions import lineage_rows


def recorded_status(conn: apsw.Connection, request: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """`session-status` for a session no engine of this process holds."""
    row = hint_ledger.session_row(conn, request["project"], request["sessionId"])
    if row is None:
        raise NotFound(f"no session {request['sessionId']!r} in project {request['project']!r}", reason="no-session")
    lineage = lineage_rows(conn, row)
    epoch = session_state.load_epoch(conn, lineage) or EpochRow()
    flags = epoch.flags
    status: dict[str, Any] = {
        "inMemory": False,
        "epoch": epoch.epoch,
        "turns": None,
        "tokens": None,
        "limits": None,
        "level": None,
        "emergencyRetention": flags.get("emergency"),
        "checkpointNeeded": bool(flags.get("checkpointNeeded")),
        "rotationQueued": bool(flags.get("rotationQueued")),
        "archivedGroups": len(session_state.archived_groups(conn, [row])),
    }
    if request.get("messages") is not None:
        budget = Budget.of(request.get("model", {}), request.get("reserveTokens"), settings, {})
        status.update(_counted(conn, lineage, epoch, request["messages"], budget))
    return status


def _counted(
    conn: apsw.Connection, lineage: list[int], epoch: EpochRow, messages: list[Any], budget: Budget
) -> dict[str, Any]:
    """Turns and tokens of the transcript from the epoch's first message on."""
    entries = unique_keys(entries_of(messages), {})
    start = next((e.index for e in entries if e.key == epoch.cut_key), 0) if epoch.cut_key else 0
    shown = entries[start:]
    decided = session_state.load_replacements(conn, lineage, [e.key for e in shown])
    tokens = hints = turns = 0
    for entry in shown:
        decision = decided.get(entry.key)
        tokens += entry.tokens if decision is None or decision.text is None else decision.tokens
        if entry.is_user:
            turns += 1
            frozen = hint_ledger.find_in_lineage(conn, lineage, entry.key)
            if frozen is not None and frozen.text:
                hints += hint_tokens(frozen.text)
    tokens += hints
    return {
        "turns": turns,
        "tokens": tokens,
        "messages": len(entries),
        "limits": budget.limits(),
        "level": budgets.level(tokens, turns, budget),
        "hintTokens": hints,
    }
