"""One bounded, resumable maintenance pass. Each task touches at most `limit` rows, so a pass
never holds the write lock for long; `more` says another pass has work left.

Tasks so far: the preflight ledgers (exposures past their cooldown are tombstoned, old tombstones
deleted, hint records idle for 30 days reclaimed).
"""

from __future__ import annotations

from typing import Any

import apsw

from cwa.store import exposure_ledger, hint_ledger
from cwa.store.connection import write_transaction


def maintain(conn: apsw.Connection, now: str, limit: int) -> dict[str, Any]:
    with write_transaction(conn):
        tombstoned, deleted = exposure_ledger.sweep(conn, now, limit)
        reclaimed = hint_ledger.reclaim_idle(conn, now, limit)
    done = {"exposuresTombstoned": tombstoned, "exposuresDeleted": deleted, "hintRecordsReclaimed": reclaimed}
    return {**done, "more": any(count >= limit for count in done.values())}
