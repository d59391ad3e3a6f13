"""Gather: a bounded packet of dated records, in the order they were written, around the best
matches for a question.

1. Anchors: explicit search with `semanticPolicy: always` (exact, structural, BM25F and semantic
   fusion, the importance prior, rerank and expansion as search does them), at most `limit`.
   Each anchor is resolved to the archived message that holds its match.
2. Neighbours: for each anchor, `before` and `after` records of the same session in chronological
   order (cwa/retrieve/chronology.py); before a forked session's first record, its recorded parent's
   (the verified lineage), never another session's. Intent presets auto 1/3, state 0/0, workflow 1/8.
3. Records are de-duplicated (a record found as an anchor stays an anchor), capped at
   `maxEvidence` (anchors first, then neighbours nearest their anchor), and put in chronological
   order. A superseded record names its replacement; records of one subject key that disagree
   are flagged with each other. Nothing is merged.
4. The rendered packet (cwa/retrieve/render.py) fits `maxTokens` under the conservative estimator,
   labels included: texts are shortened around the match (anchors) or from the far end
   (neighbours), each shortening reported with its byte counts and continuation locators; if
   even the labels do not fit, the farthest neighbours go first, and the count is reported.

Neighbours carry no score and no band: only anchors were ranked.
"""

from __future__ import annotations

from typing import Any

import apsw

from cwa import limits
from cwa.config import Settings
from cwa.retrieve import packet, render
from cwa.retrieve.chronology import Record, parent_session, record_at, records_from, same_subject
from cwa.retrieve.search import search
from cwa.store.reads import message_at
from cwa.store.secret import archive_secret
from cwa.store.sqlfiles import queries
from cwa.vocabulary import GATHER_INTENTS

INTENTS = dict(zip(GATHER_INTENTS, ((1, 3), (0, 0), (1, 8)), strict=True))  # (before, after) per anchor
LINEAGE_DEPTH = 8  # parent sessions a "before" walk may continue into


def gather(conn: apsw.Connection, request: dict[str, Any], settings: Settings, now: str) -> dict[str, Any]:
    before, after = INTENTS[request.get("intent", "auto")]
    before, after = request.get("before", before), request.get("after", after)
    max_tokens = request.get("maxTokens", limits.DEFAULT_GATHER_TOKENS)
    found = search(
        conn,
        {
            **{
                k: request[k]
                for k in ("query", "scope", "project", "sessionId", "excludeVisibleSourceKeys")
                if k in request
            },
            "limit": request.get("limit", limits.DEFAULT_GATHER_ANCHORS),
            "semanticPolicy": "always",
            "leaseSeconds": 0,
        },
        settings,
        now,
    )
    chosen: dict[tuple[int, int], dict[str, Any]] = {}
    for result in found["results"]:
        record, center = _anchor_record(conn, result)
        if record is not None and record.position[1:] not in chosen:
            chosen[record.position[1:]] = {"record": record, "anchor": True, "center": center, "result": result}
    anchors = list(chosen.values())
    visible = frozenset(request.get("excludeVisibleSourceKeys", ()))
    for distance in range(1, max(before, after) + 1):  # nearest neighbours first, across anchors
        for entry in anchors:
            for direction, wanted in (("before", before), ("after", after)):
                if distance <= wanted:
                    _add_neighbour(conn, chosen, entry, direction, distance, visible)
    # anchors first (best first), then neighbours nearest first
    picked = list(chosen.values())[: request.get("maxEvidence", limits.DEFAULT_GATHER_EVIDENCE)]
    picked.sort(key=lambda e: e["record"].position)
    secret = archive_secret(conn)
    items = [packet.record_item(conn, entry, secret, packet.reach(max_tokens, len(picked))) for entry in picked]
    _flag_conflicts(conn, items, picked)
    items, omitted, tokens = packet.fit("gather", items, picked, max_tokens, now, secret)
    rendered = render.packet("gather", items, now)
    return {
        "query": request["query"],
        "intent": request.get("intent", "auto"),
        "before": before,
        "after": after,
        "items": items,
        "omitted": omitted,
        "rendered": rendered,
        "tokens": tokens,
        "maxTokens": max_tokens,
        "scope": found["scope"],
        "requestedScope": found["requestedScope"],
        "semantic": found["semantic"],
        "reranked": found["reranked"],
        "expandedTerms": found["expandedTerms"],
    }


def _anchor_record(conn: apsw.Connection, result: dict[str, Any]) -> tuple[Record | None, int]:
    row = conn.execute(queries("search")["document_by_version"], (result["documentId"], result["version"])).fetchone()
    if row is None:
        return None, 0
    message = message_at(conn, row[0], result["range"]["start"])
    if message is None:
        return None, 0
    record = record_at(conn, row[0], message.ordinal)
    return record, max(0, result["range"]["start"] - message.text_start)


def _add_neighbour(
    conn: apsw.Connection, chosen: dict, entry: dict, direction: str, distance: int, visible: frozenset[str]
) -> None:
    """The record `distance` steps from an anchor, readable ones the caller cannot already see
    (cached per anchor). Before
    the first record of a forked session, the walk goes on in its recorded parent (the verified
    lineage, at most LINEAGE_DEPTH sessions up), never into another session."""
    cache = entry.setdefault(direction, [])
    walk = entry.setdefault(
        f"{direction}-walk", {"session": entry["record"].session_row, "last": entry["record"].position, "depth": 0}
    )
    while len(cache) < distance and walk["session"] is not None:
        found = records_from(conn, walk["session"], walk["last"], direction, 4 * distance)
        if not found:  # this session ran out: before its first record comes its parent's history
            if direction == "after" or walk["depth"] >= LINEAGE_DEPTH:
                break
            walk["session"], walk["depth"] = parent_session(conn, walk["session"]), walk["depth"] + 1
            continue
        for record in found:
            walk["last"] = record.position
            if record.readable and record.key not in visible:
                cache.append(record)
                if len(cache) >= distance:
                    break
    if len(cache) >= distance:
        record = cache[distance - 1]
        chosen.setdefault(
            record.position[1:], {"record": record, "anchor": False, "distance": distance, "direction": direction}
        )


def _flag_conflicts(conn: apsw.Connection, items: list[dict[str, Any]], picked: list[dict[str, Any]]) -> None:
    """Superseded chains and records of one subject key are flagged with each other, never merged."""
    for item, entry in zip(items, picked):
        conflicts: dict[tuple[str, int], str] = {}
        for other in same_subject(conn, entry["record"]):
            conflicts[(other["documentId"], other["version"])] = "same-subject"
        by = item.get("supersededBy")
        if by:
            conflicts[(by["documentId"], by["version"])] = "superseded-by"
        for other in items:
            replaced = other.get("supersededBy")
            if (
                other is not item
                and replaced
                and (replaced["documentId"], replaced["version"]) == (item["documentId"], item["version"])
            ):
                conflicts[(other["documentId"], other["version"])] = "supersedes"
        if conflicts:
            item["conflicts"] = [{"documentId": d, "version": v, "reason": r} for (d, v), r in conflicts.items()]
