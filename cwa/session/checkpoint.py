"""The oversized-input archive checkpoint: huge text archived exactly, the prompt keeps a preview.

`archive_checkpoint` cuts the text into UTF-8-safe parts of at most PART_BYTES, admits each as a
`checkpoint-part` document (content-addressed: a part's identity is its bytes and its place), and
only when every part is written admits the `checkpoint-root` — a bounded manifest naming the parts
in its metadata. Until the root exists nothing is usable; a failed or empty part write raises
before it, so no success is ever returned for a partial archive. A retry admits nothing new and
returns the same ids (every admission is idempotent). `get` of the root id returns the original
text, reassembled from the parts (`read_checkpoint` in cwa/store/reads.py).

Beside the ids, the caller gets what may go into the live prompt instead of the text:
- `preview`: deterministic head (70%) and tail (30%) within PREVIEW_TOKENS (cwa/tokens.py), with
  an elision marker naming the root id and the bytes left out;
- `catalogEntry`: root id, topic (the first words of the head), salient terms (from the head and
  tail only), byte count and blake3 hash — never the middle of the text.
`session_catalog` renders a session's entries within CATALOG_TOKENS, signed with the archive's
secret, so a later compaction summary that is such a catalog is recognised as covered
(`trusted_catalog`); any other previous summary is archived as its own `summary` source
(`archive_previous_summary`).
"""

from __future__ import annotations

import hmac
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import apsw
import blake3
import orjson

from cwa import limits
from cwa.errors import Internal
from cwa.index.terms import terms
from cwa.store.secret import archive_mac
from cwa.store.sqlfiles import queries
from cwa.tokens import estimate_tokens, fit_around

PART_BYTES = 1 << 20
CUT_SEARCH_BYTES = 16 << 10  # how far back from a part's limit a line or word end is looked for
PREVIEW_TOKENS = limits.CHECKPOINT_PREVIEW_TOKENS
HEAD_SHARE = 0.7
CATALOG_TOKENS = limits.CHECKPOINT_CATALOG_TOKENS
TOPIC_WORDS = 12
SALIENT_TERMS = 10
CATALOG_HEADER = "[cwa checkpoint catalog"
HEADER_TOKENS = estimate_tokens(f"{CATALOG_HEADER} {'f' * 16}]\n")


def split_parts(text: str, part_bytes: int = PART_BYTES) -> list[str]:
    """Consecutive pieces of at most `part_bytes` UTF-8 bytes, never cutting a character, and cut
    after a line (else a word) when one ends within the last CUT_SEARCH_BYTES: a part is indexed
    on its own, so a phrase cut in two could not be found."""
    data = text.encode("utf-8")
    parts, start = [], 0
    while start < len(data):
        end = min(len(data), start + part_bytes)
        if end < len(data):
            floor = max(start + 1, end - CUT_SEARCH_BYTES)
            for separator in (b"\n", b" ", b"\t"):
                at = data.rfind(separator, floor, end)
                if at >= 0:
                    end = at + 1
                    break
        while end < len(data) and (data[end] & 0xC0) == 0x80:  # inside a character: back off
            end -= 1
        parts.append(data[start:end].decode("utf-8"))
        start = end
    return parts


def archive_checkpoint(
    admit: Callable[[dict[str, Any]], dict[str, Any]],
    project: str,
    session_id: str,
    text: str,
    created_at: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Archive `text` exactly; see the module doc. `admit` is the archive's admission call;
    `progress(done, total)` hears of each part written (the root is the last step)."""
    data = text.encode("utf-8")
    digest, size = blake3.blake3(data).hexdigest(), len(data)
    base = {"project": project, "sessionId": session_id, **({"createdAt": created_at} if created_at else {})}
    parts = split_parts(text)
    written = []
    for ordinal, part in enumerate(parts):
        result = admit(
            {
                **base,
                "kind": "checkpoint-part",
                "messages": [{"key": f"checkpoint:{digest[:24]}:{ordinal}", "role": "user", "text": part}],
            }
        )
        if not result or not result.get("documentId"):
            raise Internal(
                f"part {ordinal} of checkpoint {digest[:12]} was not written; no root was made",
                reason="part-not-written",
                part=ordinal,
            )
        written.append(
            {
                "documentId": result["documentId"],
                "version": result["version"],
                "bytes": len(part.encode("utf-8")),
                "created": result["created"],
            }
        )
        if progress:
            progress(ordinal + 1, len(parts) + 1)
    head, tail, elided = _head_and_tail(text, size)
    manifest = {
        "digest": digest,
        "bytes": size,
        "parts": [[p["documentId"], p["version"], p["bytes"]] for p in written],
    }
    entry = catalog_entry(head, tail, size, digest)
    root = admit(
        {
            **base,
            "kind": "checkpoint-root",
            "metadata": {"checkpoint": manifest, "catalogEntry": entry},
            "messages": [
                {
                    "key": f"checkpoint:{digest[:24]}",
                    "role": "user",
                    "text": f"[archived input: {size} bytes in {len(parts)} part(s), blake3 {digest}]\n{head}\n…\n{tail}",
                }
            ],
        }
    )
    if not root or not root.get("documentId"):
        raise Internal(f"the root of checkpoint {digest[:12]} was not written", reason="root-not-written")
    if progress:
        progress(len(parts) + 1, len(parts) + 1)
    root_id = root["documentId"]
    marker = _marker(root_id, elided, size)
    preview = head + ("\n" + marker + "\n" + tail if elided else "")
    return {
        "rootId": root_id,
        "version": root["version"],
        "partIds": [p["documentId"] for p in written],
        "preview": preview,
        "previewTokens": estimate_tokens(preview),
        "catalogEntry": {"rootId": root_id, **entry},
        "created": root["created"] or any(p["created"] for p in written),
        # parts still without search rows (a full disk or a long lock after the root committed):
        # the input is archived exactly all the same; maintenance indexes them, nothing to retry
        "pendingParts": root.get("pendingParts", 0),
    }


def _marker(root_id: str, elided: int, size: int, what: str = "input") -> str:
    return f"[… {elided} bytes not shown: the full {what} is archived as {root_id} ({size} bytes) …]"


def preview(text: str, document_id: str, budget: int = PREVIEW_TOKENS, what: str = "input") -> str:
    """`text` itself when it fits `budget` tokens, else its head and tail around a marker naming
    the archived document; the whole preview (marker included) stays within `budget`."""
    size = len(text.encode("utf-8"))
    head, tail, elided = _head_and_tail(text, size, budget, what)
    return head + ("\n" + _marker(document_id, elided, size, what) + "\n" + tail if elided else "")


def _head_and_tail(text: str, size: int, total: int = PREVIEW_TOKENS, what: str = "input") -> tuple[str, str, int]:
    """Head and tail within `total` tokens (marker included); the bytes left between them."""
    if len(text) <= total * 8 and estimate_tokens(text) <= total:  # (≤ 4 chars a token)
        return text, "", 0
    # Room for the marker at its costliest (a long opaque id, the largest byte counts) + 2 newlines.
    budget = total - estimate_tokens("\n" + _marker("doc-" + "f" * 40, size, size, what) + "\n")
    head_budget = int(budget * HEAD_SHARE)
    window = text[: head_budget * 16]
    _, head_end = fit_around(window, head_budget, 0)
    tail_window = text[max(head_end, len(text) - (budget - head_budget) * 16) :]
    tail_start, _ = fit_around(tail_window, budget - head_budget, len(tail_window) - 1)
    tail_from = len(text) - len(tail_window) + tail_start
    head, tail = text[:head_end], text[tail_from:]
    elided = len(text[head_end:tail_from].encode("utf-8"))
    return head, tail, elided


_WORD = re.compile(r"\S+")


def catalog_entry(head: str, tail: str, size: int, digest: str) -> dict[str, Any]:
    """Topic, salient terms, bytes and hash (the root id is added once known); built from the
    head and tail only."""
    topic = " ".join(_WORD.findall(head)[:TOPIC_WORDS])
    counts = Counter(t for t in terms(head + "\n" + tail) if len(t) >= 4 and not t.isdigit())
    salient = [t for t, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:SALIENT_TERMS]]
    return {"topic": topic, "salientTerms": salient, "bytes": size, "blake3": digest}


def render_catalog(conn: apsw.Connection, entries: list[dict[str, Any]], budget: int = CATALOG_TOKENS) -> str:
    """A signed catalog of archived entries in the order given, within `budget` tokens."""
    lines: list[str] = []
    for entry in entries:
        when = f" ({entry['from'][:16]}Z)" if entry.get("from") else ""
        line = (
            f"- {entry['rootId']}{when}: {entry['topic']!r}; terms {', '.join(entry['salientTerms'])}; "
            f"{entry['bytes']} bytes" + (f"; blake3 {entry['blake3'][:16]}" if entry.get("blake3") else "")
        )
        if estimate_tokens("\n".join([*lines, line])) + HEADER_TOKENS > budget:
            break
        lines.append(line)
    body = "\n".join(lines)
    return f"{CATALOG_HEADER} {archive_mac(conn, body.encode('utf-8'))}]\n{body}"


def trusted_catalog(conn: apsw.Connection, summary: str) -> bool:
    """Whether `summary` holds a catalog this archive rendered, unaltered."""
    match = re.search(re.escape(CATALOG_HEADER) + r" ([0-9a-f]{16})\]\n((?:- .*(?:\n|$))*)", summary)
    if not match:
        return False
    body = match.group(2).rstrip("\n")
    return hmac.compare_digest(match.group(1), archive_mac(conn, body.encode("utf-8")))


def session_catalog(conn: apsw.Connection, project: str, session_id: str) -> dict[str, Any]:
    """The session's live checkpoint roots, newest first, as entries and as signed text."""
    entries = []
    for document_id, metadata in conn.execute(queries("reads")["session_checkpoints"], (project, session_id)):
        entry = orjson.loads(metadata).get("catalogEntry") if metadata else None
        if entry:
            entries.append({"rootId": document_id, **entry})
    return {"text": render_catalog(conn, entries), "entries": entries}


def archive_previous_summary(
    conn: apsw.Connection,
    admit: Callable[[dict[str, Any]], dict[str, Any]],
    project: str,
    session_id: str,
    summary: str,
) -> dict[str, Any]:
    """An earlier compaction's summary is a source too, unless it is a catalog this archive made."""
    if trusted_catalog(conn, summary):
        return {"archived": False, "documentId": None}
    admitted = admit(
        {
            "project": project,
            "sessionId": session_id,
            "kind": "summary",
            "messages": [{"role": "compactionSummary", "text": summary}],
        }
    )
    return {"archived": True, "documentId": admitted["documentId"]}


def checkpoint_keys(text: str) -> list[str]:
    """The message keys `archive_checkpoint` gives the root and parts of `text`: while the preview
    is in the live context these sources are visible, so automatic preflight skips them."""
    digest = blake3.blake3(text.encode("utf-8")).hexdigest()[:24]
    count = len(split_parts(text))
    return [f"checkpoint:{digest}", *(f"checkpoint:{digest}:{i}" for i in range(count))]
