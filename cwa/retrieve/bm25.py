"""BM25F over the window index with each phrase's window count known beforehand.

FTS5's `bm25()` counts every phrase's windows itself, by reading the phrase's whole posting
list once per statement, before it scores a single row. On a large archive that read, not the
scoring, is most of a query made only of common terms: with two terms each in two thirds of a
million windows, ranking the newest 5,000 ids takes 78 ms where fetching them takes 9
(eval/perf/idf_scan.py). `cwa_bm25` is the same formula (k1 1.2, b 0.75, the column weights of
cwa/index/lexical.py, IDF floored at 1e-6, row length over the index's average) fed the counts
search already holds (`frequencies`), scoring each matched row in Python at about twice
FTS5's cost a row; `cheaper` says when that trade wins. Given exact counts it returns bm25()'s
float; a common term's count may be up to a tenth stale (cwa/retrieve/context.py), and its
IDF with it. Asked to (its third argument), it also keeps each row's score without the context
field aside for the statement's caller (`own_scores`): search weighs a window's own text apart
from its context in a long history."""

from __future__ import annotations

import math
from functools import partial
from weakref import WeakKeyDictionary

import apsw
import orjson

from cwa.index.lexical import COLUMNS, WEIGHTS

FUNCTION = "cwa_bm25"
K1, B = 1.2, 0.75
TITLE, USER, ASSISTANT, BODY, CONTEXT = (WEIGHTS[c] for c in COLUMNS)
# Microseconds, measured on the 100,000- and 1,000,000-window coding archives of `cwa eval perf
# --keep` (2-core machine) by `python eval/perf/lexical_profile.py ARCHIVE --calibrate`: FTS5
# counting one posting and scoring one matched row (ordered by the bm25() call, sql/search.sql
# `lexical_top`), and this function scoring one matched row, plus its cost per phrase.
COUNT_POSTING_US = 0.025
FTS5_ROW_US = 1.0
PYTHON_ROW_US = 1.8
PYTHON_PHRASE_US = 0.7

# Per connection: the latest statement's rows scored without the context field, by rowid.
_OWN: WeakKeyDictionary[apsw.Connection, dict[int, float]] = WeakKeyDictionary()


def cheaper(postings: int, phrases: int, matches: float) -> bool:
    """Whether scoring `matches` rows here costs less than FTS5 counting `postings` postings
    (every phrase's window count, added up) and scoring them itself."""
    fts5 = COUNT_POSTING_US * postings + FTS5_ROW_US * matches
    return (PYTHON_ROW_US + PYTHON_PHRASE_US * phrases) * matches < fts5


def register(conn: apsw.Connection) -> None:
    """Make `cwa_bm25(window_fts, hits, own)` available on `conn` (once per connection)."""
    if conn not in _OWN:
        own: dict[int, float] = {}
        conn.register_fts5_function(FUNCTION, partial(_score, own=own))
        _OWN[conn] = own


def own_scores(conn: apsw.Connection) -> dict[int, float]:
    """The rows the latest `cwa_bm25` statement on `conn` scored, by rowid: each one's score
    without the context field, as `bm25()` with the context weight 0 returns it."""
    return _OWN.get(conn, {})


def _statistics(api: apsw.FTS5ExtensionApi, hits: str) -> tuple[list[float], float]:
    """Each phrase's IDF, from the windows holding it (`hits`, a JSON array in phrase order), and
    the index's average row length: FTS5's own formula for both."""
    rows = api.row_count
    idf = []
    for hit in orjson.loads(hits):
        value = math.log((rows - hit + 0.5) / (hit + 0.5))
        idf.append(value if value > 0.0 else 1e-6)
    return idf, api.column_total_size(-1) / rows


def _score(api: apsw.FTS5ExtensionApi, hits: str, keep_own: int, own: dict[int, float]) -> float:
    """-BM25F of the current row, as `bm25()` returns it (lower is better). With `keep_own`, its
    score without the context field goes to `own`, emptied as each statement begins."""
    found = api.aux_data
    if found is None:
        found = api.aux_data = _statistics(api, hits)
        own.clear()
    idf, average = found
    norm = K1 * (1.0 - B + B * api.column_size(-1) / average)
    score = own_score = 0.0
    locations = api.phrase_locations
    for phrase, weight in enumerate(idf):
        title, user, assistant, body, context = locations(phrase)
        # FTS5 adds a column's weight once per instance, column by column. The first four weights
        # are exact in binary, so their products are those sums; context's is added as FTS5 does.
        frequency = TITLE * len(title) + USER * len(user) + ASSISTANT * len(assistant) + BODY * len(body)
        if frequency:
            own_score += weight * ((frequency * (K1 + 1.0)) / (frequency + norm))
        for _ in context:
            frequency += CONTEXT
        if frequency:
            score += weight * ((frequency * (K1 + 1.0)) / (frequency + norm))
    if keep_own:
        own[api.rowid] = -own_score
    return -score
