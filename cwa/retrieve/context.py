"""What every candidate query of one search (or preflight) shares: scope, visible keys, lineage,
the clock, the scope's window id range, and the lexical index's term frequencies looked up so far
(in the whole archive, and within the range)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import apsw
import orjson

from cwa.index.terms import fts_phrase
from cwa.retrieve import calibration
from cwa.retrieve.scope import Scope
from cwa.store.connection import BOOKKEEPING_SKIPPED, brief_wait
from cwa.store.sessions import lineage_of_key
from cwa.store.sqlfiles import queries
from cwa.store.term_counts import COMMON_TERM_DRIFT, COMMON_TERM_WINDOWS
from cwa.timestamps import epoch_ms

NEAR_DUPLICATE_SLACK = 3  # extra candidates read, so collapsing near copies still fills a page


@dataclass
class Context:
    conn: apsw.Connection
    scope: Scope
    visible: str | None  # JSON array of message keys, for SQL
    visible_keys: frozenset[str]
    now: str
    lineage: set[int]
    frequencies: dict[str, int] = field(default_factory=dict)  # term → windows holding it
    windows: int | None = None  # windows in the lexical index, read once per context
    window_span: tuple[int, int] | None = None  # the scope's window ids, as FTS5 bounds (window_span)
    scoped: dict[str, tuple[int, int]] = field(default_factory=dict)  # term → (windows within window_span, count cap)
    include_superseded: bool = False  # preflight looks at them only to name its reason

    @cached_property
    def now_ms(self) -> int:
        """`now` as the archive stores times (epoch milliseconds)."""
        return epoch_ms(self.now)

    def filters(self) -> dict:
        return {**self.scope.params(), "superseded": int(self.include_superseded)}


def make_context(conn: apsw.Connection, scope: Scope, visible: list[str], now: str, session_id: str | None) -> Context:
    """What every candidate query needs: scope, visible keys (also as JSON for SQL), the lineage
    of the asking session (preferred on near-ties)."""
    lineage: set[int] = set(orjson.loads(scope.session_rows)) if scope.session_rows else set()
    if not lineage and scope.project_row and session_id:
        lineage = set(lineage_of_key(conn, scope.project_row, session_id))
    keys = orjson.dumps(visible).decode() if visible else None
    return Context(conn, scope, keys, frozenset(visible), now, lineage)


# fts5vocab counts a term's windows by reading its whole posting list: for a term in most windows
# of a million-window archive that costs 10-20 ms, more than the rest of a search. A common term's
# count moves slowly, so it is reused until the archive's window count has moved by more than
# COMMON_TERM_DRIFT: kept per process, and in the archive (`term_counts`, migration 0025) for the
# next process (and every common term at once by each maintenance pass: cwa/store/term_counts.py);
# rarer terms are counted afresh (cheap, and exact where IDF matters).
_COMMON: dict[tuple[str, str], tuple[int, int]] = {}  # (archive file, term) → (windows holding it, windows then)
COMMON_TERM_CACHE = 100_000  # entries, at most


def frequencies(ctx: Context, words: list[str]) -> tuple[dict[str, int], int]:
    """Window frequency of each term and the number of windows, each looked up once per search."""
    sql = queries("search")
    if ctx.windows is None:
        ctx.windows = ctx.conn.execute(sql["window_count"]).fetchone()[0]
    wanted = [w for w in dict.fromkeys(words) if w not in ctx.frequencies]
    unknown = [w for w in wanted if (ctx.conn.filename, w) not in _COMMON]
    kept = {}
    if unknown:  # one read of the archive's kept counts for every term this process lacks
        found = ctx.conn.execute(sql["kept_term_counts"], (orjson.dumps(unknown).decode(),))
        kept = {term: (windows, then) for term, windows, then in found}
    counted = []
    for word in wanted:
        key = (ctx.conn.filename, word)
        known = _COMMON.get(key) or kept.get(word)
        if known is not None and abs(ctx.windows - known[1]) <= COMMON_TERM_DRIFT * known[1]:
            ctx.frequencies[word] = known[0]
            _remember(key, known)
            continue
        row = ctx.conn.execute(sql["term_frequency"], (word,)).fetchone()  # fts5vocab does not push IN down
        ctx.frequencies[word] = row[0] if row else 0
        if ctx.frequencies[word] > COMMON_TERM_WINDOWS:
            _remember(key, (ctx.frequencies[word], ctx.windows))
            counted.append((word, ctx.frequencies[word], ctx.windows))
    if counted:
        _keep(ctx.conn, counted)
    return {w: ctx.frequencies[w] for w in words}, ctx.windows


def _remember(key: tuple[str, str], count: tuple[int, int]) -> None:
    if key not in _COMMON and len(_COMMON) >= COMMON_TERM_CACHE:
        _COMMON.clear()
    _COMMON[key] = count


def _keep(conn: apsw.Connection, counted: list[tuple[str, int, int]]) -> None:
    """Write common terms' counts for later processes, in one statement; a read never waits for
    it (a writer holding the lock, a read-only file or a full disk: the next count tries again)."""
    try:
        with brief_wait(conn, 0):
            conn.execute(queries("search")["keep_term_counts"], (orjson.dumps(counted).decode(),))
    except BOOKKEEPING_SKIPPED:
        pass


UNBOUNDED = (0, 1 << 62)  # window ids (exclusive low, inclusive high): every window
# A scope's counts stop at this share of its range: a term in a tenth of the windows is far below
# every hint gate's specificity (0.45 and up; about 0.37 at most there), so its exact count does
# not matter, and counting stays bounded by the range, not by the term's whole posting list.
SCOPED_COUNT_SHARE = 10
WHOLE_ARCHIVE_SHARE = 0.9  # a range holding this much of the archive is counted as the archive


def window_span(ctx: Context) -> tuple[int, int]:
    """The window ids a search's scope can hold, as FTS5 bounds (after `low`, up to `high`): its
    project's range (migration 0026; a session lies within its project's), or every id (every
    project, or a project with no window yet, which then matches none)."""
    if ctx.window_span is None:
        found = None
        if ctx.scope.project_row is not None:
            found = ctx.conn.execute(queries("search")["project_window_span"], (ctx.scope.project_row,)).fetchone()
        ctx.window_span = (found[0] - 1, found[1]) if found else UNBOUNDED
    return ctx.window_span


def scope_windows(ctx: Context) -> int:
    """The number of windows `scope_frequencies` counts within: the scope's range, or the whole
    archive's count where the range is most of it."""
    _, total = frequencies(ctx, [])
    low, high = window_span(ctx)
    return total if high - low >= WHOLE_ARCHIVE_SHARE * total else high - low


SCOPE_TERMS_WINDOWS = 4_096  # the newest windows `scope_holds_terms` reads, at most


def scope_holds_terms(ctx: Context, terms: int) -> bool:
    """Whether the scope's windows hold at least `terms` indexed terms (their `term_count`),
    counted over its newest SCOPE_TERMS_WINDOWS windows at most, so the cost stays bounded in a
    long history (whose newest windows alone hold 25,000 terms unless they average under 7)."""
    low, high = window_span(ctx)
    found = ctx.conn.execute(
        queries("search")["scope_terms"], {"low": low, "high": high, "windows": SCOPE_TERMS_WINDOWS}
    ).fetchone()[0]
    return found >= terms


def scope_frequencies(ctx: Context, words: list[str], cap: int | None = None) -> tuple[dict[str, int], int]:
    """Window frequency of each term within the scope's window range, and the range's size: the
    statistics of what a project's search looks at, where `frequencies` counts the whole archive
    (every project). Where the range is most of the archive, these are `frequencies`; otherwise
    each count reads only the range's part of the term's posting list and stops at `cap` (default
    a tenth of the range: a term that common is never specific). A range may hold other projects'
    windows interleaved with the project's, so a count is never below the project's own."""
    df, total = frequencies(ctx, words)
    size = scope_windows(ctx)
    if size == total:
        return df, total
    low, high = window_span(ctx)
    cap = cap or size // SCOPED_COUNT_SHARE + 1
    sql = queries("search")
    for word in dict.fromkeys(words):
        known = ctx.scoped.get(word)
        if known is None or known[0] >= known[1] < cap:  # not counted, or stopped short of this cap
            bounds = {"low": low, "high": high, "cap": cap}
            found = ctx.conn.execute(sql["scoped_term_windows"], {"term": fts_phrase(word), **bounds}).fetchone()[0]
            ctx.scoped[word] = (min(found, df[word]), cap)
    return {w: min(ctx.scoped[w][0], cap) for w in words}, size


def specific_in_scope(ctx: Context, term: str, frequency: int, threshold: float) -> bool:
    """Whether a term is at least `threshold` specific (`calibration.specificity`) among the
    scope's windows. The scope holds at most the archive's count of it (`frequency`): specific at
    that count, it is specific here without counting; else it is counted within the scope, no
    further than the most windows it could be in and still be that specific."""
    most = calibration.most_specific_windows(scope_windows(ctx), threshold)
    if frequency <= most:
        return True
    df, _ = scope_frequencies(ctx, [term], cap=most + 1)
    return df[term] <= most
