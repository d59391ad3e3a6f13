"""Exact anchors: the identifiers people search for verbatim.

Types and their specificity (how strongly one exact hit identifies a source):

    error   0.95  exception names (LockTimeoutError), error codes (ERR_LOCK_TIMEOUT, ENOENT, E0425)
    path    0.90  src/retry.py, ./a/b, ~/x/y.json, retry.py (a file name with an extension)
    url     0.90  https://…
    commit  0.85  7–40 lower-case hex digits with both letters and digits
    quoted  0.80  "…", '…' or `…` (2–200 characters, one line)
    symbol  0.75  camelCase, PascalCase, snake_case, SCREAMING_CASE, dotted.names
    value   0.60  versions (v1.2, 1.2.3), numbers with units (30 s, 64 KiB), ports (:8080),
                  issue ids (#123), UUIDs

Anchors are found in message text (never in the serialized headers). Each distinct text is stored
once, case-sensitive and NFKC-case-folded, in the `anchor_texts` dictionary; a document holds a
text once, by id, with the bits of every type it was found as and the byte range of its first
occurrence as the most specific of them. Under the
per-document budget of MAX_ANCHORS_PER_DOCUMENT distinct anchors, higher specificity wins and
the outcome is `partial`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

import apsw
import orjson

from cwa.store import anchor_keys, anchor_lists
from cwa.store.derived import HandlerResult, IndexTarget, add_full_text
from cwa.store.serialization import SerializedDocument
from cwa.store.sqlfiles import queries

MAX_ANCHORS_PER_DOCUMENT = 2000

SPECIFICITY = {
    "error": 0.95,
    "path": 0.90,
    "url": 0.90,
    "commit": 0.85,
    "quoted": 0.80,
    "symbol": 0.75,
    "value": 0.60,
}

# The ids of `anchor_types` (migration 0017): SPECIFICITY's order, most specific first. A
# document's anchor row holds bit 1 << id for each type its text was found as (migration 0024).
TYPE_IDS = {name: number for number, name in enumerate(SPECIFICITY, start=1)}

_EXTENSIONS = (
    r"py|pyi|ts|tsx|js|jsx|mjs|cjs|json|jsonl|md|rst|txt|toml|yaml|yml|ini|cfg|conf|rs|go|c|h|"
    r"cc|cpp|hpp|java|kt|rb|php|cs|swift|sh|bash|zsh|sql|html|css|scss|xml|csv|lock|log|env|"
    r"proto|graphql|vue|svelte|dockerfile|mk|gradle|ipynb|db|sqlite"
)

# Each pattern runs over bytes; group 1 (when present) is the anchor, else the whole match. A
# leading lookahead only states what every alternative needs anyway (same matches): it lets the
# scan skip most positions without trying each alternative there (`symbol` and `value` two to
# four times as fast, the same matches: eval/perf/anchor_patterns.py).
_PATTERNS: list[tuple[str, re.Pattern[bytes]]] = [
    ("url", re.compile(rb"\bhttps?://[^\s<>\"'`)\]]+[^\s<>\"'`)\].,;:!?]")),
    (
        "error",
        re.compile(
            rb"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Fault|Failure|Panic|Timeout)|"
            rb"(?:ERR|ERROR|E)_[A-Z0-9_]{2,}|E[A-Z]{3,}[0-9]*|[A-Z]{1,4}[0-9]{3,5})\b"
        ),
    ),
    (
        "path",
        re.compile(
            rb"(?<![\w/.~-])((?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]*[\w@+-]"
            rb"|[\w-][\w.-]*\.(?:" + _EXTENSIONS.encode() + rb"))(?![\w/])",
            re.I,
        ),
    ),
    ("commit", re.compile(rb"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")),
    (
        "quoted",
        re.compile(rb"\"([^\"\n]{2,200})\"|(?<!\w)'([^'\n]{2,200})'(?!\w)|`([^`\n]{2,200})`"),
    ),
    (
        "symbol",
        # every form has an upper-case letter, `.` or `_` past its first character; the lookahead
        # runs after `\b`, at word starts only (before it, it would scan the rest of a long word
        # from each of its characters: quadratic in a 40 KB run of letters)
        re.compile(
            rb"\b(?=[A-Za-z_][A-Za-z0-9]*[A-Z._])"
            rb"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+"
            rb"|[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+"
            rb"|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+|[A-Z]{2,}[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)*"
            rb"|[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+)\b"
        ),
    ),
    (
        "value",
        re.compile(  # every form starts with one of these
            rb"(?=[0-9a-fv:#])"
            rb"(\bv?\d+\.\d+(?:\.\d+)+(?:[-+][\w.]+)?\b|\bv\d+\.\d+\b"
            rb"|\b\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds|min|mins|minutes|h|hours|days|"
            rb"KiB|MiB|GiB|KB|MB|GB|kB|B|bytes|%|px)(?![\w])"
            rb"|(?<=[\w\]]):\d{2,5}\b|#\d{2,}\b"
            rb"|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b)"
        ),
    ),
]


# A `:NN` right after a file name (`retry.py:42`, `retry.py:42:7`) is a line or column number, not
# a port: tool output (compilers, linters, test runners, grep -n) holds one per line, and as
# value anchors they were a quarter of such a document's rows while naming nothing by themselves.
_FILE_POSITION = re.compile(rb"\.(?:" + _EXTENSIONS.encode() + rb")(?::\d+)?\Z", re.I)
_FILE_POSITION_REACH = 24  # bytes looked at before the colon: the longest extension and a line number


def _line_number(data: bytes, anchor_type: str, start: int) -> bool:
    """Whether a `value` match at `start` is a file's line or column number (see above)."""
    return (
        anchor_type == "value"
        and data[start : start + 1] == b":"
        and _FILE_POSITION.search(data, max(0, start - _FILE_POSITION_REACH), start) is not None
    )


@dataclass(frozen=True)
class Anchor:
    type: str
    text: str
    start: int  # byte offsets into the scanned bytes
    end: int

    @property
    def folded(self) -> str:
        return fold(self.text)

    @property
    def specificity(self) -> float:
        return SPECIFICITY[self.type]


def fold(text: str) -> str:
    if text.isascii():  # NFKC leaves ASCII as it is, and casefold lowers it: the same, faster
        return text.lower()
    return unicodedata.normalize("NFKC", text).casefold()


def _folded_or_none(text: str) -> str | None:
    """The folded form the dictionary stores: none when folding changes nothing."""
    folded = fold(text)
    return None if folded == text else folded


def find_anchors(data: bytes, offset: int = 0) -> list[Anchor]:
    """Every anchor in `data`, with byte offsets shifted by `offset`, in pattern order."""
    found = []
    for anchor_type, pattern in _PATTERNS:
        for match in pattern.finditer(data):
            group = match.lastindex or 0
            if _line_number(data, anchor_type, match.start(group)):
                continue
            text = match.group(group).decode("utf-8", errors="replace").strip()
            if text:
                found.append(Anchor(anchor_type, text, offset + match.start(group), offset + match.end(group)))
    return found


def query_anchors(query: str) -> list[Anchor]:
    """Anchors in a query, most specific first, one per text. An anchor inside a larger one
    (`retry.py` inside `src/retry.py`) is dropped: the user asked for the larger one."""
    found = find_anchors(query.encode("utf-8"))
    outer = [
        a
        for a in found
        if not any(o.start <= a.start and a.end <= o.end and (o.end - o.start) > (a.end - a.start) for o in found)
    ]
    best: dict[str, Anchor] = {}
    for anchor in sorted(outer, key=lambda a: (-a.specificity, a.start)):
        best.setdefault(anchor.text, anchor)
    return list(best.values())


MAX_SUFFIXES = 4


_SYMBOL_SEGMENT = re.compile(
    r"[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+|[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+"
)


def name_parts(name: str, separator: str) -> list[tuple[str, int, int]]:
    """Shorter spellings a person may search for, as (text, byte offset, byte length) in `name`.

    Suffixes: the path `/home/me/app/src/retry.py` is also `app/src/retry.py`, `src/retry.py`
    and `retry.py`; the dotted name `retry.RetryPolicy.run` is also `RetryPolicy.run` and `run`.
    A dotted name's segments that are identifiers themselves (`RetryPolicy`) count too."""
    found: dict[str, tuple[int, int]] = {}
    position = len(name)
    while len(found) < MAX_SUFFIXES:
        position = name.rfind(separator, 0, position)
        if position < 0:
            break
        suffix = name[position + 1 :]
        if suffix:
            found.setdefault(suffix, (len(name[: position + 1].encode()), len(suffix.encode())))
    if separator == ".":
        offset = 0
        for segment in name.split("."):
            if _SYMBOL_SEGMENT.fullmatch(segment):
                found.setdefault(segment, (offset, len(segment.encode())))
            offset += len(segment.encode()) + 1
    return [(text, offset, length) for text, (offset, length) in found.items()]


def document_anchors(document: SerializedDocument) -> tuple[list[tuple[Anchor, int]], bool]:
    """Distinct (type, text) anchors of a document with occurrence counts, within the budget."""
    data = document.text
    first: dict[tuple[str, str], tuple[int, int]] = {}
    counts: dict[tuple[str, str], int] = {}
    for message in document.messages:
        region = data[message.text_start : message.end]
        for anchor_type, pattern in _PATTERNS:
            for match in pattern.finditer(region):
                group = match.lastindex or 0
                if _line_number(region, anchor_type, match.start(group)):
                    continue  # every time: the same `:17` may also be a port elsewhere, counted alone
                key = (anchor_type, match.group(group))
                if key in counts:
                    counts[key] += 1
                    continue
                counts[key] = 1
                first[key] = (message.text_start + match.start(group), message.text_start + match.end(group))
    anchors = []
    for (anchor_type, raw), (start, end) in first.items():
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        anchors.append((Anchor(anchor_type, text, start, end), counts[(anchor_type, raw)]))
        separator = {"path": "/", "symbol": "."}.get(anchor_type)
        if separator and separator in text:
            for part, offset, length in name_parts(text, separator):
                anchors.append(
                    (Anchor(anchor_type, part, start + offset, start + offset + length), counts[(anchor_type, raw)])
                )
    anchors.sort(key=lambda pair: (-pair[0].specificity, pair[0].start))
    kept = anchors[:MAX_ANCHORS_PER_DOCUMENT]
    merged: dict[tuple[str, str], tuple[Anchor, int]] = {}
    for anchor, count in kept:  # stripping may make two raw spellings one anchor
        key = (anchor.type, anchor.text)
        merged[key] = (merged[key][0], merged[key][1] + count) if key in merged else (anchor, count)
    return list(merged.values()), len(anchors) > len(kept)


def anchor_rows(anchors: list[tuple[Anchor, int]]) -> list[list]:
    """A document's anchors as its rows: one per text, `[text, folded or None, type bits, start,
    end, occurrences, dictionary key]`, the range and count those of its most specific type."""
    rows: dict[str, list] = {}
    for anchor, count in anchors:
        bit = 1 << TYPE_IDS[anchor.type]
        row = rows.get(anchor.text)
        if row is None:
            rows[anchor.text] = [
                anchor.text,
                _folded_or_none(anchor.text),
                bit,
                anchor.start,
                anchor.end,
                count,
                anchor_keys.key(anchor.text),
            ]
            continue
        if bit < row[2] & -row[2]:  # more specific than every type seen so far
            row[3:] = [anchor.start, anchor.end, count]
        row[2] |= bit
    return list(rows.values())


def add_text_ids(conn: apsw.Connection, sql: Mapping[str, str], rows: list[list]) -> list[int]:
    """Append to each row its text's dictionary id, the texts the dictionary lacks added (in the
    rows' order, so ids follow first appearance); the ids, in the rows' order. Each text is looked
    up once; admission's write transaction keeps another writer from adding it in between."""
    ids: list[int | None] = [None] * len(rows)
    for position, text_id in conn.execute(sql["find_anchor_texts"], {"anchors": orjson.dumps(rows).decode()}):
        ids[position] = text_id
    missing = [row for row, text_id in zip(rows, ids) if text_id is None]
    if missing:
        added = dict(conn.execute(sql["insert_anchor_texts"], {"anchors": orjson.dumps(missing).decode()}))
        ids = [added[row[0]] if text_id is None else text_id for row, text_id in zip(rows, ids)]
    for row, text_id in zip(rows, ids):
        row.append(text_id)
    return ids


class ExactHandler:
    name = "exact"

    def prepare(self, kind: str, document: SerializedDocument) -> tuple[list[list], list[bytes], bool]:
        """The document's anchor rows (anchor_rows), each entry's list bytes but its text id
        (anchor_lists.tail), and whether the budget cut some: all the work that needs no
        dictionary id, so the write lock waits for none of it."""
        anchors, cut = document_anchors(document)
        rows = anchor_rows(anchors)
        return rows, [anchor_lists.tail(row[2], row[3], row[4], row[5]) for row in rows], cut

    def index(self, conn: apsw.Connection, target: IndexTarget) -> HandlerResult:
        prepared = target.prepared.get(self.name)
        rows, tails, cut = prepared if prepared is not None else self.prepare(target.kind, target.document)
        if rows:
            sql = queries("index")
            ids = add_text_ids(conn, sql, rows)
            packed = anchor_lists.pack_tails(zip(ids, tails))
            conn.execute(sql["insert_anchors"], {"packed": packed, "row": target.document_row})
            postings = {"texts": anchor_lists.posting_tokens(ids), "row": target.document_row}
            add_full_text(conn, target, sql["insert_anchor_postings"], postings)
        if cut:
            return HandlerResult("partial", f"kept the {MAX_ANCHORS_PER_DOCUMENT} most specific anchors")
        return HandlerResult("complete")
