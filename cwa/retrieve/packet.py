"""Records as packet items within a token budget: what gather and traverse return.

An item is a record's identity, a signed locator of its whole message, and its text: read only
as far as the budget could ever show (around the match for an anchor, from the near end for a
neighbour), then shortened so that the rendered packet (cwa/retrieve/render.py) stays within
`maxTokens` under the conservative estimator, labels and notes included. Every shortening is
reported: bytes shown of the message's total, and signed continuation locators of what was left
out before and after. If even the labels do not fit, the farthest records go first and are
counted as omitted.
"""

from __future__ import annotations

from typing import Any

import apsw
import orjson

from cwa.retrieve import render
from cwa.retrieve.chronology import Record
from cwa.retrieve.locators import Locator, sign
from cwa.store.sqlfiles import queries
from cwa.tokens import estimate_tokens, fit_around, pieces_of

MIN_TEXT_TOKENS = 24  # a record shortened below this is dropped instead
QUOTES = 4  # the two quote marks around a JSON-quoted text (each costs 2 under cwa/tokens.py)
READ_BYTES_PER_TOKEN = 8  # a token rarely covers more bytes: read no more than a share could show


def reach(max_tokens: int, records: int) -> int:
    """Tokens of text worth reading per record: twice an even share of the budget (a record may
    get more when others are short), never less than 256."""
    return max(256, 2 * max_tokens // max(1, records))


def message_locator(
    record: Record, secret: bytes, unit: str = "message", start: int | None = None, end: int | None = None
) -> str:
    return sign(
        Locator(
            record.document_id,
            record.version,
            unit,
            None,
            record.text_start if start is None else start,
            record.end if end is None else end,
            record.ordinal if unit == "message" else None,
            None,
            None,
            record.project,
            record.session,
            "project",
        ),
        secret,
    )


def record_item(conn: apsw.Connection, entry: dict[str, Any], secret: bytes, reach_tokens: int) -> dict[str, Any]:
    """A record as an item: identity, locator, flags, anchor facts (`anchor` entries only) and the
    text within `reach_tokens` of the match (of the near end, for a neighbour): what its share
    of a budget could show. `entry` holds the record and how it was found."""
    record: Record = entry["record"]
    item: dict[str, Any] = {
        **record.identity(),
        "superseded": record.state == "superseded",
        "locator": message_locator(record, secret),
        "bytes": record.size,
    }
    if "anchor" in entry:
        item["anchor"] = entry["anchor"]
    if entry.get("anchor"):
        result = entry["result"]
        item.update(
            score=result["score"], band=result["band"], reranked=result["reranked"], matchType=result["matchType"]
        )
    elif "distance" in entry:
        item.update(direction=entry["direction"], distance=entry["distance"])
    if item["superseded"]:
        by = conn.execute(queries("search")["replacement_of"], (record.row,)).fetchone()
        item["supersededBy"] = {"documentId": by[0], "version": by[1]} if by else None
    reach = reach_tokens * READ_BYTES_PER_TOKEN
    if record.size <= reach:
        start, end = record.text_start, record.end
    elif entry.get("anchor"):
        middle = record.text_start + entry["center"]
        start = max(record.text_start, middle - reach // 2)
        end = min(record.end, start + reach)
    elif entry.get("direction") == "before":
        start, end = record.end - reach, record.end
    else:
        start, end = record.text_start, record.text_start + reach
    item["text"], start, end = record.text(conn, start, end)
    item["shown"] = {"start": start, "end": end}
    return item


class _Row:
    """One record being fitted: its item, how it was found, and the estimator's pieces of its
    text (cut once; the raw cost is their sum)."""

    def __init__(self, item: dict[str, Any], entry: dict[str, Any], overhead: tuple[int, int]):
        self.item, self.entry, self.overhead = item, entry, overhead
        self.pieces = pieces_of(item["text"])
        self.cost = sum(cost for _, _, cost in self.pieces) + QUOTES


def fit(
    what: str, items: list[dict[str, Any]], entries: list[dict[str, Any]], max_tokens: int, now: str, secret: bytes
) -> tuple[list[dict[str, Any]], int, int]:
    """Shorten texts (and, when labels alone do not fit, drop the farthest records) until the
    rendered packet is within `max_tokens`: (items, records omitted, the packet's tokens). A
    packet's estimate is the sum of its parts' (they join at line breaks), so each part is
    estimated once."""
    omitted = 0
    rows = [_Row(item, entry, _overhead(item, len(items), now)) for item, entry in zip(items, entries)]
    while rows:
        budgets = _shares(what, rows, max_tokens)
        if budgets is not None:
            labels = [
                estimate_tokens(
                    render.record_label(row.item, n, now, render.new_session([r.item for r in rows], n - 1))
                )
                for n, row in enumerate(rows, 1)
            ]
            for _ in range(8):  # labels and notes are estimated apart: shrink until it truly fits
                fitted = [_shorten(row, share) for row, share in zip(rows, budgets)]
                total = packet_tokens(what, [item for item, _ in fitted], [cost for _, cost in fitted], labels)
                if total <= max_tokens:
                    return [_signed(item, row.entry, secret) for (item, _), row in zip(fitted, rows)], omitted, total
                budgets = [max(MIN_TEXT_TOKENS, int(b * 0.85)) for b in budgets]
        farthest = max(
            range(len(rows)), key=lambda i: (not rows[i].entry.get("anchor"), rows[i].entry.get("distance", 0), i)
        )
        rows.pop(farthest)
        omitted += 1
    return [], omitted, estimate_tokens(render.packet(what, [], now))


def packet_tokens(what: str, items: list[dict[str, Any]], text_costs: list[int], label_costs: list[int]) -> int:
    """The estimate of `render.packet(what, items, now)` from its parts: the header, and per
    record a blank line, its label (`label_costs`), its quoted text (`text_costs`) and its
    truncation note. The parts join at line breaks, so their estimates add up."""
    total = estimate_tokens(render.packet_header(what, items))
    for item, cost, label in zip(items, text_costs, label_costs):
        total += 4 + label + 2 + cost
        note = render.truncation_note(item)
        if note:
            total += 2 + estimate_tokens(note)
    return total


def _overhead(item: dict[str, Any], number: int, now: str) -> tuple[int, int]:
    """Tokens of a record's block other than its text, at most (its session named, as record
    `number`, the widest number it can have): without and with its truncation note."""
    plain = estimate_tokens(render.record_label(item, number, now)) + 2 + 4
    note = render.truncation_note({**item, "truncated": {"shownBytes": item["bytes"], "totalBytes": item["bytes"]}})
    return plain, plain + estimate_tokens(note) + 2


def _shares(what: str, rows: list[_Row], max_tokens: int) -> list[int] | None:
    """Each record's text budget: the room left after header and labels, shared so that short
    texts keep all they need and long ones split the rest (water-filling); None when a share
    would be too small. Records that will be cut pay for their truncation note."""
    costs = [row.cost for row in rows]
    header = estimate_tokens(render.packet_header(what, [row.item for row in rows]))
    cut = [False] * len(rows)
    shares = [0] * len(rows)
    for _ in range(len(rows) + 1):  # without notes, then with the notes of the records that get cut
        room = max_tokens - header - sum(rows[i].overhead[cut[i]] for i in range(len(rows)))
        if room < MIN_TEXT_TOKENS * len(rows):
            return None
        shares = [0] * len(rows)
        pending = sorted(range(len(rows)), key=lambda i: costs[i])
        while pending:
            share = room // len(pending)
            if costs[pending[0]] > share:
                for index in pending:
                    shares[index] = share
                break
            index = pending.pop(0)
            shares[index] = costs[index]
            room -= costs[index]
        now_cut = [shares[i] < costs[i] for i in range(len(rows))]
        if now_cut == cut:
            break
        cut = [a or b for a, b in zip(cut, now_cut)]
    return shares


def _shorten(row: _Row, share: int) -> tuple[dict[str, Any], int]:
    """The item with its text, JSON-quoted, within `share` tokens, and that quoted cost."""
    item, entry = row.item, row.entry
    record: Record = entry["record"]
    text, shown = item["text"], item["shown"]
    left, right = 0, len(text)
    focus = 0
    if entry.get("anchor"):  # the match's byte offset, as a character offset into the text read
        offset = record.text_start + entry["center"] - shown["start"]
        focus = len(text.encode("utf-8")[: max(0, offset)].decode("utf-8", errors="ignore"))
    elif entry.get("direction") == "before":
        focus = len(text) - 1
    focus = min(max(0, focus), max(0, len(text) - 1))
    budget = max(1, share - QUOTES)
    while True:  # quoting can cost more than the text (an escape joins the word after it)
        if row.cost - QUOTES > budget:
            left, right = fit_around(text, budget, focus, row.pieces) if text else (0, 0)
        cost = estimate_tokens(orjson.dumps(text[left:right]).decode())
        if budget == 1 or cost <= share:
            break
        budget = max(1, int(budget * 0.9))
    start = shown["start"] + len(text[:left].encode("utf-8"))
    end = start + len(text[left:right].encode("utf-8"))
    truncated = None
    if (start, end) != (record.text_start, record.end):
        truncated = {"shownBytes": end - start, "totalBytes": record.size}
    return {**item, "text": text[left:right], "shown": {"start": start, "end": end}, "truncated": truncated}, cost


def _signed(item: dict[str, Any], entry: dict[str, Any], secret: bytes) -> dict[str, Any]:
    """A shortened item with signed locators of the message text left out before and after it."""
    if not item.get("truncated"):
        return item
    record: Record = entry["record"]
    start, end = item["shown"]["start"], item["shown"]["end"]
    continuation = {
        side: message_locator(record, secret, "range", low, high)
        for side, low, high in (("before", record.text_start, start), ("after", end, record.end))
        if high > low
    }
    return {**item, "truncated": {**item["truncated"], "continuation": continuation}}
