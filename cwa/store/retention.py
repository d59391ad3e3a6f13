"""Storage retention: when archived bytes may go, separate from automatic-hint eligibility.

Each class keeps its documents for its setting's days (ephemeral tool payloads 14, conversation
90, derived 30; durable never; 0 days = never) from their retention start: the latest of their
creation time, their admission and the end of the last context protection that covered them (a
live window named them until then; cwa/store/protection.py). So an old message archived today
keeps its days from today, and what a window showed keeps them from when it left. The schedule
(`expiry_schedule`) holds one due time per document that may expire, indexed by due time, so
maintenance reads only what is due. The plan it was computed from is kept in `meta`; when the
resolved settings differ, the changed classes are planned again before anything expires.

Expiry re-checks each due entry before acting: the document is still live or superseded, not
pinned, its entry current for today's settings, and no active search lease or context protection
covers it (a protected entry is postponed to the protection's end; one whose protection lapsed
since the last clean-up counts its days from the lapse). Then it is marked `expired`
at once — out of every search mode and recalled as `expired` — and queued for the purge of its
bytes and derived rows (cwa/store/purge.py).
"""

from __future__ import annotations

import apsw
import orjson

from cwa.store.sqlfiles import queries
from cwa.vocabulary import READABLE_STATES

PLAN_KEY = "retention_plan"
EXPIRING_CLASSES = ("ephemeral", "conversation", "derived")


def plan_of(settings) -> dict[str, int]:
    """Days per expiring class (0: never), from the resolved settings."""
    return {c: settings.retention_days(c) or 0 for c in EXPIRING_CLASSES}


def adopt_plan_if_unset(conn: apsw.Connection, plan: dict[str, int]) -> None:
    """Record the plan admissions schedule by, so the first maintenance pass of a new archive has
    nothing to re-plan. Not while documents from before migration 0006 await their first full
    plan (those have no entries yet)."""
    conn.execute(queries("lifecycle")["meta_set_if_missing"], (PLAN_KEY, _encoded(plan)))


def _encoded(plan: dict[str, int]) -> str:
    return orjson.dumps(plan, option=orjson.OPT_SORT_KEYS).decode()


def schedule(
    conn: apsw.Connection, document_row: int, retention_class: str, plan: dict[str, int], new: bool = False
) -> None:
    """(Re)compute one document's entry: none for durable, pinned or 0-day classes. A `new`
    document (admitted in this transaction) has none to remove."""
    sql = queries("lifecycle")
    if not new:
        conn.execute(sql["unschedule_document"], (document_row,))
    days = plan.get(retention_class, 0)
    if days:
        conn.execute(sql["schedule_document"], {"row": document_row, "days": days})


def restart_clock(conn: apsw.Connection, row: int, at: str) -> None:
    """A context protection of `row` ended `at`: its retention counts from then on (its entry, if
    it has one, moves later; never earlier)."""
    sql = queries("lifecycle")
    conn.execute(sql["mark_shown_until"], {"row": row, "until": at})
    conn.execute(sql["reschedule_document"], {"row": row})


def replan(conn: apsw.Connection, plan: dict[str, int]) -> list[str]:
    """Plan again the classes whose days changed since the schedule was computed (or every class,
    the first time); returns them. Runs inside the caller's transaction."""
    sql = queries("lifecycle")
    stored = conn.execute(sql["meta_get"], (PLAN_KEY,)).fetchone()
    previous = orjson.loads(stored[0]) if stored else {}
    changed = [c for c in EXPIRING_CLASSES if previous.get(c) != plan[c]]
    for retention_class in changed:
        conn.execute(sql["clear_class_schedule"], {"class": retention_class})
        if plan[retention_class]:
            conn.execute(sql["plan_class"], {"class": retention_class, "days": plan[retention_class]})
    if changed:
        conn.execute(sql["meta_set"], (PLAN_KEY, _encoded(plan)))
    if len(changed) == len(EXPIRING_CLASSES):
        conn.execute(sql["backfill_done"])  # every document has been planned
    return changed


def expire_due(conn: apsw.Connection, now: str, plan: dict[str, int], limit: int) -> dict[str, int]:
    """Act on at most `limit` due entries (inside the caller's transaction)."""
    sql = queries("lifecycle")
    done = {"expired": 0, "postponed": 0, "dropped": 0}
    for row, _, days, retention_class, state, pinned in conn.execute(
        sql["due_entries"], {"now": now, "limit": limit}
    ).fetchall():
        if state not in READABLE_STATES or pinned or plan.get(retention_class, 0) != days:
            schedule(conn, row, retention_class, plan)  # stale: recomputed (or gone), never acted on
            done["dropped"] += 1
            continue
        until, lapsed = conn.execute(sql["protected_until"], {"row": row, "now": now}).fetchone()
        if until is not None:
            conn.execute(sql["postpone"], {"row": row, "until": until})
            done["postponed"] += 1
            continue
        if lapsed is not None:  # shown until then: its days count from there
            restart_clock(conn, row, lapsed)
            if conn.execute(sql["due_at"], {"row": row}).fetchone()[0] > now:
                done["postponed"] += 1
                continue
        conn.execute(sql["set_state"], {"row": row, "state": "expired", "now": now})
        conn.execute(sql["unschedule_document"], (row,))
        conn.execute(sql["queue_purge"], (row, "expired", now))
        done["expired"] += 1
    return done


def due_count(conn: apsw.Connection, now: str) -> int:
    return conn.execute(queries("lifecycle")["due_count"], {"now": now}).fetchone()[0]
