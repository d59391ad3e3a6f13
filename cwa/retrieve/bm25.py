"""BM25F over the window index with each phrase's window count known beforehand.

FTS5's `bm25()` counts every phrase's windows itself, by reading the phrase's whole posting
list once per statement, before it scores a single row. On a large archive that read, not the
scoring, is most of a query made only of common terms: two terms in most of a million windows
cost about 25 ms to count even when only the newest 5,000 matching windows are scored.
`cwa_bm25` is the same formula (k1 1.2, b 0.75, the column weights of cwa/index/lexical.py,
IDF floored at 1e-6, row length over the index's average) fed the counts search already holds
(`frequencies`, cached per process for common terms), scoring each matched row in Python,
about three times what FTS5's own scoring costs a row. `cheaper` says when that trade wins.
"""

from __future__ import annotations

import math
from weakref import WeakSet

import apsw
import orjson

from cwa.index.lexical import COLUMNS, WEIGHTS

FUNCTION = "cwa_bm25"
K1, B = 1.2, 0.75
_COLUMN_WEIGHTS = tuple(WEIGHTS[c] for c in COLUMNS)
# Microseconds, measured on the 100,000-window coding archive of `cwa eval perf` (2-core machine,
# eval/perf/lexical_profile.py): FTS5 counting one posting, FTS5 scoring one matched row, and
# this function scoring one matched row, plus its cost per phrase.
COUNT_POSTING_US = 0.06
FTS5_ROW_US = 1.1
PYTHON_ROW_US = 1.8
PYTHON_PHRASE_US = 0.7

_REGISTERED: WeakSet[apsw.Connection] = WeakSet()


def cheaper(postings: int, phrases: int, matches: float) -> bool:
    """Whether scoring `matches` rows here costs less than FTS5 counting `postings` postings
    (every phrase's window count, added up) and scoring them itself."""
    fts5 = COUNT_POSTING_US * postings + FTS5_ROW_US * matches
    return (PYTHON_ROW_US + PYTHON_PHRASE_US * phrases) * matches < fts5


def register(conn: apsw.Connection) -> None:
    """Make `cwa_bm25(window_fts, hits)` available on `conn` (once per connection)."""
    if conn not in _REGISTERED:
        conn.register_fts5_function(FUNCTION, _score)
        _REGISTERED.add(conn)


def _statistics(api: apsw.FTS5ExtensionApi, hits: str) -> tuple[list[float], float]:
    """Each phrase's IDF, from the windows holding it (`hits`, a JSON array in phrase order), and
    the index's average row length: FTS5's own formula for both."""
    rows = api.row_count
    idf = []
    for hit in orjson.loads(hits):
        value = math.log((rows - hit + 0.5) / (hit + 0.5))
        idf.append(value if value > 0.0 else 1e-6)
    return idf, api.column_total_size(-1) / rows


def _score(api: apsw.FTS5ExtensionApi, hits: str) -> float:
    """-BM25F of the current row, as `bm25()` returns it (lower is better)."""
    found = api.aux_data
    if found is None:
        found = api.aux_data = _statistics(api, hits)
    idf, average = found
    norm = K1 * (1.0 - B + B * api.column_size(-1) / average)
    score = 0.0
    for phrase, weight in enumerate(idf):
        frequency = 0.0
        # Added instance by instance, in FTS5's order, so the sum is bm25()'s to the last bit.
        for column, offsets in enumerate(api.phrase_locations(phrase)):
            for _ in offsets:
                frequency += _COLUMN_WEIGHTS[column]
        if frequency:
            score += weight * ((frequency * (K1 + 1.0)) / (frequency + norm))
    return -score
