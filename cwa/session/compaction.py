"""The compaction checkpoint: archive what a host is about to summarize, then answer with a catalog.

Given the host's compaction preparation (messages to summarize, a split turn's prefix, the previous
summary and the details of the previous compaction), every exact source is archived first — as
turn documents per interaction group, split across bounded documents when large, each message
under its own transcript key, in order — and only then is the answer built: a signed catalog
summary within CATALOG_TOKENS and versioned details `{"cwa": {"version": 1, "entries": [...]}}`.
Nothing of the archived text reaches the answer beyond each entry's topic (the first words) and
salient terms (from its head and tail), so no summarizer ever sees raw content. Prior details are
trusted only from that versioned namespace, entry by entry, and only for documents of the project
that still exist; a previous summary's prose is never parsed, only archived as a `summary` source
(unless it is a catalog this archive signed). Any failure raises, so the host cancels compaction.
"""

from __future__ import annotations

from typing import Any

from cwa import limits
from cwa.errors import NotFound
from cwa.session.checkpoint import CATALOG_TOKENS, archive_previous_summary, catalog_entry, render_catalog
from cwa.session.transcript import Entry, entries_of, groups, unique_keys
from cwa.session.turns import CATALOG_HEAD_CHARS, CATALOG_TAIL_CHARS, admitter, archive_group, decided_texts
from cwa.store.hint_ledger import session_row
from cwa.store.reads import find_document, read_bytes
from cwa.store.sessions import lineage_rows as session_lineage
from cwa.tokens import estimate_tokens
from cwa.vocabulary import READABLE_STATES

DETAILS_VERSION = 1
MAX_ENTRIES = 512  # entries carried in details, newest kept
HEAD_BYTES = 8 * CATALOG_HEAD_CHARS  # enough bytes for the head's characters, whatever their width
TAIL_BYTES = 4 * CATALOG_TAIL_CHARS


def compact(host: Any, request: dict[str, Any]) -> dict[str, Any]:
    project, session = request["project"], request["sessionId"]
    admit = admitter(host)
    scope = {"project": project, "sessionId": session}
    if request.get("parentSessionId"):
        scope["parentSessionId"] = request["parentSessionId"]
    messages = list(request["messagesToSummarize"]) + list(request.get("turnPrefixMessages", []))
    entries = unique_keys(entries_of(messages), {})
    shown = _shown_texts(host, project, session, entries)
    new_entries: list[dict[str, Any]] = []
    for group in groups(entries):
        new_entries.extend(archive_group(admit, scope, group, shown, describe=True))
    previous = None
    if request.get("previousSummary"):
        previous = archive_previous_summary(host.conn, admit, project, session, request["previousSummary"])
    carried = trusted_entries(host.conn, project, request.get("previousDetails"))
    seen = {e["rootId"] for e in new_entries}
    everything = new_entries + [e for e in carried if e["rootId"] not in seen]
    newest_first = list(reversed(new_entries)) + [e for e in carried if e["rootId"] not in seen]
    intro = (
        f"[cwa] {len(entries)} earlier message(s) of this session were archived exactly before compaction "
        f"({len(new_entries)} document(s)); earlier archives are listed too. Find them with the archive's "
        "search and gather tools and recall any id below for the exact text."
    )
    catalog = render_catalog(host.conn, newest_first, CATALOG_TOKENS - estimate_tokens(intro + "\n"))
    summary = intro + "\n" + catalog
    return {
        "summary": summary,
        "summaryTokens": estimate_tokens(summary),
        "details": {"cwa": {"version": DETAILS_VERSION, "entries": everything[-MAX_ENTRIES:]}},
        "archived": [e["rootId"] for e in new_entries],
        "messages": len(entries),
        "previousSummary": previous,
    }


def _shown_texts(host: Any, project: str, session: str, entries: list[Entry]) -> dict[str, str]:
    """What the provider saw of the messages the engine replaced (their sources are archived)."""
    row = session_row(host.conn, project, session)
    if row is None:
        return {}
    return decided_texts(host.conn, session_lineage(host.conn, row), entries)


def trusted_entries(conn: Any, project: str, details: Any) -> list[dict[str, Any]]:
    """Prior catalog entries, only from `{"cwa": {"version": 1, "entries": [...]}}` and only for
    readable documents of the project; each entry is rebuilt from the archive (its topic and
    terms from the document's head and tail), so nothing the host file says is repeated."""
    if not isinstance(details, dict) or not isinstance(details.get("cwa"), dict):
        return []
    namespace = details["cwa"]
    if namespace.get("version") != DETAILS_VERSION or not isinstance(namespace.get("entries"), list):
        return []
    trusted, seen = [], set()
    for entry in namespace["entries"][-MAX_ENTRIES:]:
        root = entry.get("rootId") if isinstance(entry, dict) else None
        if not isinstance(root, str) or root in seen or len(root) > limits.MAX_DOCUMENT_ID_CHARS:
            continue
        seen.add(root)
        rebuilt = _archived_entry(conn, project, root)
        if rebuilt is not None:
            trusted.append(rebuilt)
    return trusted


def _archived_entry(conn: Any, project: str, document_id: str) -> dict[str, Any] | None:
    try:
        doc = find_document(conn, document_id, None)
    except NotFound:
        return None
    if doc["project"] != project or doc["state"] not in READABLE_STATES:
        return None
    size = doc["byteLength"]
    head = read_bytes(conn, doc["row"], 0, min(size, HEAD_BYTES))[0].decode("utf-8", "ignore")
    tail = (
        read_bytes(conn, doc["row"], size - TAIL_BYTES, size)[0].decode("utf-8", "ignore") if size > HEAD_BYTES else ""
    )
    return {
        "rootId": document_id,
        "version": doc["version"],
        "kind": doc["kind"],
        "from": doc["createdAt"],
        **catalog_entry(head[:CATALOG_HEAD_CHARS], tail[-CATALOG_TAIL_CHARS:], size, ""),
    }
