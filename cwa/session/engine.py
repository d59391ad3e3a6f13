"""The epoch-window engine: a host's full transcript in, the provider-facing copy out.

The provider copy of an epoch is the transcript from the epoch's first message on, with
- tool results above `maxToolResultTokens` (or above `toolResultBudgetFloorTokens` once inline
  results have used `toolResultBudgetRatio` of the rotation target) archived as `tool-result`
  documents and shown as a head/tail preview naming the archive id;
- exact repeats of a tool result still in the epoch shown as a short marker;
- user input above `maxInlineUserTokens` archived exactly (checkpoint) and shown as its preview;
- each user message followed by its frozen preflight hint (a `custom` message), if any.

Within an epoch the copy only grows (prompt caches keep their prefix). Every decision is made once,
when a message first enters an epoch, and stored in the archive (cwa/store/session_state.py, the
hint ledger), so a restart, a reload or a fork with verified lineage rebuilds the same bytes.

Rotation happens at a user message (its first sight) when the epoch reaches the rotation target
or `rotationTurns` user messages, or when one was queued (`session-rotate`): the latest
`retainTurns` complete groups stay if they fit the target (otherwise fewer, down to one:
emergency retention; if one does not fit, a checkpoint is reported as needed), retained tool
results above the floor become previews, removed groups are archived as turn documents, and the
hints of removed messages leave with them (their budget is freed).

Every document the provider copy names — a preview's or a dedup marker's source, an oversized
input's checkpoint, a compaction catalog's entries, an id in search results the agent read, a
hint's source — stays readable while the session can still show it: the engine keeps one context
protection for the session (cwa/store/protection.py) that covers exactly those documents, renewed
by every call that changes them and at least hourly, each call holding them SHOWN_PROTECTION_SECONDS
(7 days). "Can still show it" means: the document is named by the session's current epoch and a
host called for the session within those 7 days. A session that is never closed but goes quiet
keeps them that long after its last call; then, as when a rotation drops a document from the
copy, the class's retention counts from that moment (`shown_until`), so a tool output a window
showed stays readable at least 7 + 14 days after the window last showed it.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

import apsw
import blake3

from cwa.config import Settings
from cwa.errors import Conflict, NotFound
from cwa.limits import MAX_SOURCE_MESSAGES, MAX_VISIBLE_KEYS, PREFLIGHT_QUERY_CHARS
from cwa.retrieve import preflight
from cwa.session import budget as budgets
from cwa.session.budget import Budget
from cwa.session.checkpoint import archive_checkpoint, checkpoint_keys, preview
from cwa.session.status import recorded_status
from cwa.session.transcript import (
    COMMAND_HEAD_CHARS,
    EMPTY_DIGEST,
    TOOL_ROLES,
    Entry,
    beyond_slack_tokens,
    chain_digest,
    content_text,
    entries_of,
    group_complete,
    groups,
    hint_tokens,
    history_groups,
    left_out,
    serialize,
    shown_tokens,
    sizing_tokens,
    tool_calls,
    unique_keys,
    with_text,
)
from cwa.session.turns import TURN_PART_BYTES, Admit, admitter, archive_group, archive_tool_result, decided_texts
from cwa.store import hint_ledger, index_queue, protection, session_state
from cwa.store.admission import document_ids_in
from cwa.store.connection import BOOKKEEPING_SKIPPED, durable_writes, write_transaction
from cwa.store.derived import IndexHandler
from cwa.store.reads import find_document
from cwa.store.session_state import EpochRow, Replacement
from cwa.store.sessions import ensure_project, ensure_session
from cwa.store.sessions import lineage_rows as session_lineage
from cwa.timestamps import shift

TOOL_PREVIEW_TOKENS = 400  # below the smallest floor, so a rebalanced result always shrinks
DEDUP_MIN_TOKENS = 64  # a marker is not worth it for smaller output
HINT_TYPE = "cwa-hint"
ENGINES_IN_MEMORY = 16
CATCH_UP_MESSAGES = 1_000  # a first sight with more messages past the epoch's start cuts once (catch-up)
SHOWN_PROTECTION_SECONDS = 7 * 86_400  # how long one call keeps what the copy names readable
PROTECTION_RENEWAL_SECONDS = 3_600  # an unchanged protection is written again at most this often


class Host(Protocol):
    """What the engine needs of an open archive (cwa.api.Archive provides it)."""

    conn: apsw.Connection
    path: Path
    settings: Settings
    handlers: Sequence[IndexHandler]
    clock: Callable[[], str]
    index_worker: Any  # with one, admissions leave their derived rows to it (cwa/store/index_queue.py)


class DecidedElsewhere(Conflict):
    """Another process stored a different decision for a message this engine decided: its copy is
    not the one the archive holds, and is built again from what is stored (a host that meets it
    resends its whole transcript, as after any resync)."""

    def __init__(self, key: str) -> None:
        super().__init__(
            "another process decided this session's messages first; send every message once",
            reason="resync-required",
            digest=None,
            messageKey=key,
        )


@dataclass
class Shown:
    """One transcript message in the epoch, as the provider sees it, and its hint."""

    entry: Entry
    message: dict[str, Any]
    tokens: int
    action: str = "inline"
    document_id: str | None = None
    shown_text: str | None = None  # the text in place of the message's own, when replaced
    hint: dict[str, Any] | None = None
    hint_tokens: int = 0
    hint_sources: tuple[str, ...] = ()  # document ids of the hint's sources

    @cached_property
    def named(self) -> list[str]:
        """The document ids the provider sees this message name (read once: a retained message is
        added to every later epoch's copy)."""
        ids = document_ids_in(self.entry.text if self.shown_text is None else self.shown_text)
        return ids + [self.document_id] if self.document_id else ids


class ProviderCopy:
    """The epoch's messages as the provider sees them, with the running totals every call reads
    (kept as messages arrive, so a delta costs the same whatever the epoch's length)."""

    def __init__(self, shown: list[Shown] = ()) -> None:
        self.shown: list[Shown] = []
        self.messages: list[dict[str, Any]] = []
        self.keys: list[str] = []  # every message key, in order
        self.user_keys: list[str] = []
        self.tokens = self.hint_tokens = 0
        self.actions: Counter[str] = Counter()
        self.named: Counter[str] = Counter()  # document ids the copy names, and how often
        for item in shown:
            self.add(item)
            if item.hint is not None:
                self.messages.append(item.hint)
                self.tokens += item.hint_tokens
                self.hint_tokens += item.hint_tokens
                self.named.update(item.hint_sources)

    def add(self, shown: Shown) -> None:
        self.shown.append(shown)
        self.messages.append(shown.message)
        self.keys.append(shown.entry.key)
        if shown.entry.is_user:
            self.user_keys.append(shown.entry.key)
        self.tokens += shown.tokens
        self.actions[shown.action] += 1
        self.named.update(shown.named)

    def add_hint(self, shown: Shown, text: str, sources: tuple[str, ...]) -> None:
        """Attach a hint after `shown`, the message added last."""
        shown.hint = {
            "role": "custom",
            "customType": HINT_TYPE,
            "content": text,
            "display": False,
            "timestamp": shown.entry.raw.get("timestamp"),
        }
        shown.hint_tokens = hint_tokens(text)
        shown.hint_sources = sources
        self.messages.append(shown.hint)
        self.tokens += shown.hint_tokens
        self.hint_tokens += shown.hint_tokens
        self.named.update(sources)


def _hint_sources(response: dict[str, Any]) -> tuple[str, ...]:
    """The document ids of a preflight answer's hint sources."""
    return tuple(
        h["source"]["documentId"]
        for h in response.get("hints", ())
        if isinstance(h.get("source"), dict) and h["source"].get("documentId")
    )


def _visible_text(entry: Entry) -> str:
    """The text the provider would see for a message (what a preview is cut from): a bash
    message's output (its command too, when the command is long enough to be cut)."""
    if entry.role == "bashExecution":
        output = entry.raw.get("output")
        command = entry.raw.get("command")
        if isinstance(command, str) and len(command) > COMMAND_HEAD_CHARS:
            return entry.text
        return output if isinstance(output, str) else ""
    return content_text(entry.raw.get("content"), "message")[0]


def _user_text(entry: Entry) -> str:
    """A user message's text blocks (images left out): what an oversized input archives."""
    content = entry.raw.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n\n".join(
        b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def _archived_text(entry: Entry) -> str:
    """What a replaced message archives exactly: a user message's text blocks (its images stay
    in the copy), any other message's whole text; and every part its replacement leaves out."""
    return (_user_text(entry) if entry.is_user else entry.text) + left_out(entry)


def _retained(sizes: list[int], arriving: int, target: int, wanted: int) -> tuple[int, bool]:
    """How many of the latest groups (`sizes`, oldest first) a new epoch keeps beside the arriving
    message: the most, up to `wanted`, that fit `target` with it, and at least one; and whether
    even that one did not fit (a checkpoint is needed)."""
    if not wanted:
        return 0, False
    fitting = next((count for count in range(wanted, 0, -1) if sum(sizes[-count:]) + arriving <= target), 0)
    return max(fitting, 1), fitting == 0


def _output_preview(entry: Entry, document_id: str) -> str:
    """A tool output's preview in the copy, naming its archive."""
    return _naming(preview(_visible_text(entry), document_id, TOOL_PREVIEW_TOKENS, what="output"), document_id)


def _naming(text: str, document_id: str) -> str:
    """`text` (a preview), with a line naming the archive when the preview shows all of its text
    but the message had other parts that were left out."""
    if document_id in text:
        return text
    return text + f"\n[parts of this message not shown here are archived as {document_id}]"


class SessionEngine:
    """One session's transcript and epoch, kept in memory between calls of one process."""

    def __init__(self, host: Host, project: str, session_key: str, parent_key: str | None) -> None:
        self.host = host
        self.project, self.session_key, self.parent_key = project, session_key, parent_key
        now = host.clock()
        with write_transaction(host.conn):
            self.session = ensure_session(
                host.conn, ensure_project(host.conn, project, now), session_key, parent_key, now
            )
        self.lineage = session_lineage(host.conn, self.session)
        self.epoch = session_state.load_epoch(host.conn, self.lineage) or EpochRow()
        self.entries: list[Entry] = []
        self.taken: dict[str, int] = {}
        self.digest = EMPTY_DIGEST
        self.view = ProviderCopy()
        self.tool_tokens = 0
        self.signatures: dict[tuple[str, str, str], Shown] = {}
        self.calls: dict[str, tuple[str, str]] = {}
        self.archived = session_state.archived_groups(host.conn, self.lineage)
        self.budget: Budget | None = None
        self.returned: tuple[int, int] | None = None  # (epoch, length) of the last provider copy sent
        self.extra_visible: dict[str, list[str]] = {}  # user key → checkpoint keys of its preview
        self.protected: tuple[frozenset[str], str] | None = None  # (ids, until) last written
        self.backlog: deque[list[Entry]] = deque()  # complete groups before the epoch, not archived yet
        self.pending: list[tuple[str, Replacement, int | None, bool]] = []  # decisions not written yet
        self.admit = admitter(host)  # in a request: the host's index worker, if any, indexes later
        self.admit_inline = admitter(host, defer=False)  # between turns: nothing waits on it

    # -- scope ---------------------------------------------------------------------------------

    @property
    def scope(self) -> dict[str, str]:
        scope = {"project": self.project, "sessionId": self.session_key}
        if self.parent_key:
            scope["parentSessionId"] = self.parent_key
        return scope

    # -- the transcript ------------------------------------------------------------------------

    def extend(
        self, messages: list[Any], budget: Budget, events: list[dict[str, Any]], parsed: list[Entry] | None = None
    ) -> None:
        """Take the messages after those already known (`parsed`: already read, from the start of
        a fresh engine); the epoch follows them."""
        self.budget = budget
        first = not self.entries
        new = unique_keys(parsed if parsed is not None else entries_of(messages, len(self.entries)), self.taken)
        for entry in new:
            self.digest = chain_digest(self.digest, entry.key)
        self.entries.extend(new)
        self.calls.update(tool_calls(new))
        if first:
            self._after_compaction()
            cut = self.epoch.cut_key
            start = next((e.index for e in self.entries if e.key == cut), 0) if cut else 0
            if len(self.entries) - self._first_unseen(start) > CATCH_UP_MESSAGES:
                start = self._catch_up_cut(start, events)
            self._queue_backlog(start)
            fresh = self.entries[start:]
        else:
            fresh = new
        decided = session_state.load_replacements(self.host.conn, self.lineage, [e.key for e in fresh])
        last_user = next((e.index for e in reversed(self.entries) if e.is_user), None)
        for entry in fresh:
            self._enter(entry, decided.get(entry.key), entry.index == last_user, events)
        self._save()
        self._protect_named()

    # -- catching up with a long history -------------------------------------------------------

    def _first_unseen(self, start: int) -> int:
        """Where the messages no engine has seen before begin, from `start` on: at the first user
        message without a frozen hint decision (every user message an engine sees gets one), or
        the end. What was seen is rebuilt exactly, however long."""
        users = [e for e in self.entries[start:] if e.is_user]
        seen = hint_ledger.frozen_keys(self.host.conn, self.lineage, [e.key for e in users])
        return next((e.index for e in users if e.key not in seen), len(self.entries))

    def _catch_up_cut(self, start: int, events: list[dict[str, Any]]) -> int:
        """A first sight of more than CATCH_UP_MESSAGES unseen messages past the epoch's start: rather
        than replaying every rotation, cut once, as a rotation at the latest user message would
        (the latest `retainTurns` groups that fit the target, down to one), and leave everything
        before the cut to the backlog. Returns the new start."""
        budget = self.budget
        assert budget is not None
        span = groups(self.entries[start:])
        if len(span) < 2 or not span[-1][0].is_user:
            return start
        arriving, previous = span[-1], span[:-1]
        wanted = min(budget.retain_turns, len(previous))
        sizes = [sum(e.tokens for e in g) for g in previous]
        kept, checkpoint_needed = _retained(sizes, sum(e.tokens for e in arriving), budget.target, wanted)
        first_kept = previous[len(previous) - kept][0]
        self._new_epoch(first_kept.key, "catch-up", kept, wanted, checkpoint_needed)
        self._announce_rotation(
            "catch-up",
            kept,
            wanted,
            checkpoint_needed,
            len(previous) - kept,
            [],
            events,
            backlogMessages=first_kept.index - start,
        )
        return first_kept.index

    def _queue_backlog(self, start: int) -> None:
        """The complete groups before the epoch's start that no archive of this lineage holds yet
        (a catch-up's history, or what a process killed mid-archive left): archived in the
        background by `catch_up`, packed into few turn documents."""
        self.backlog = deque(g for g in groups(self.entries[:start]) if (g[0].key, g[-1].key) not in self.archived)

    def catch_up(self, seconds: float | None = None) -> bool:
        """Archive backlog groups, packed into turn documents of at most the admission limits,
        until `seconds` have passed (None: all of them); whether any are left."""
        started = time.monotonic()
        while self.backlog:
            batch: list[list[Entry]] = []
            messages = size = 0
            while self.backlog:  # whole groups, while they fit one document (characters ≤ bytes / 4)
                group = self.backlog[0]
                grown = size + sum(len(e.text) for e in group)
                if batch and (messages + len(group) > MAX_SOURCE_MESSAGES or grown > TURN_PART_BYTES // 4):
                    break
                batch.append(self.backlog.popleft())
                messages, size = messages + len(group), grown
            try:
                self._archive_packed(batch)
            except BaseException:
                self.backlog.extendleft(reversed(batch))  # not archived: tried again later
                raise
            if seconds is not None and time.monotonic() - started >= seconds:
                break
        return bool(self.backlog)

    def _archive_packed(self, batch: list[list[Entry]]) -> None:
        """Whole groups into one turn document (a group beyond the limits alone splits, as
        rotation splits it), each group recorded as archived."""
        entries = [e for group in batch for e in group]
        shown = decided_texts(self.host.conn, self.lineage, entries)
        documents = archive_group(self.admit_inline, self.scope, entries, shown)
        ids = [d["rootId"] for d in documents]
        with write_transaction(self.host.conn):
            session_state.record_turns(
                self.host.conn, self.session, [(g[0].key, g[-1].key) for g in batch], ids, self.host.clock()
            )
        self.archived.update((g[0].key, g[-1].key) for g in batch)

    def _protect_named(self) -> None:
        """Keep what the provider copy names readable (the module doc says for how long)."""
        named = frozenset(self.view.named)
        now = self.host.clock()
        renew_after = shift(now, SHOWN_PROTECTION_SECONDS - PROTECTION_RENEWAL_SECONDS)
        if self.protected is not None and self.protected[0] == named and self.protected[1] > renew_after:
            return
        until = shift(now, SHOWN_PROTECTION_SECONDS)
        try:
            protection.protect_named(self.host.conn, f"session:{self.session}", self.project, named, until, now)
        except BOOKKEEPING_SKIPPED:  # the next call tries again; retention counts from archiving meanwhile
            return
        self.protected = (named, until)

    def _after_compaction(self) -> None:
        """A transcript that now starts with a compaction summary the engine has not seen is a
        compaction reset: a new epoch from the summary on (kept messages keep their decisions)."""
        head = self.entries[0] if self.entries else None
        if head is None or head.role != "compactionSummary" or head.key == self.epoch.flags.get("compactionKey"):
            return
        self._save(EpochRow(self.epoch.epoch + 1, None, {"compactionKey": head.key}))

    def _enter(
        self, entry: Entry, decided: Replacement | None, latest_user: bool, events: list[dict[str, Any]]
    ) -> None:
        """Add one message to the epoch: replay its decision, or make it now."""
        if entry.is_user:
            frozen = hint_ledger.find_in_lineage(self.host.conn, self.lineage, entry.key)
            shown = self._decide_message(entry, decided, events)
            if frozen is None:  # first sight of this user message: a boundary
                self._boundary(shown, events)
                self.view.add(shown)
                self._hint(shown, latest_user, events)
            else:
                self.view.add(shown)
                if frozen.text:
                    self.view.add_hint(shown, frozen.text, _hint_sources(frozen.response))
            return
        if entry.role in TOOL_ROLES:
            shown = self._decide_tool(entry, decided, events)
        else:
            shown = self._decide_message(entry, decided, events)
        self.view.add(shown)

    # -- decisions -----------------------------------------------------------------------------

    def _apply(self, entry: Entry, decision: Replacement) -> Shown:
        if decision.text is None:
            return Shown(entry, entry.raw, entry.tokens, decision.action, decision.document_id)
        return Shown(
            entry,
            with_text(entry, decision.text),
            decision.tokens,
            decision.action,
            decision.document_id,
            decision.text,
        )

    def _record(self, entry: Entry, decision: Replacement, version: int | None, update: bool = False) -> None:
        """Keep a decision: it is written with the rest of the turn's (`_save`)."""
        self.pending.append((entry.key, decision, version, update))

    def _save(self, epoch: EpochRow | None = None) -> None:
        """Write the decisions made since the last write, and the epoch when it changes, in one
        transaction: the one place the engine's state reaches the archive. A decision another
        process stored first for the same message wins; when it differs, nothing of this turn is
        kept (DecidedElsewhere) and the copy is built again from what is stored."""
        if epoch is None and not self.pending:
            return
        conn, now = self.host.conn, self.host.clock()
        with write_transaction(conn):
            for key, decision, version, update in self.pending:
                session_state.save_replacement(conn, self.session, key, decision, version, now, update=update)
                if not update and not conn.changes() and not self._stored_alike(key, decision):
                    raise DecidedElsewhere(key)
            if epoch is not None:
                session_state.save_epoch(conn, self.session, epoch, now)
        self.pending = []
        if epoch is not None:
            self.epoch = epoch

    def _stored_alike(self, key: str, decision: Replacement) -> bool:
        stored = session_state.load_replacements(self.host.conn, [self.session], [key]).get(key)
        return stored is not None and (stored.action, stored.document_id, stored.text) == (
            decision.action,
            decision.document_id,
            decision.text,
        )

    def _decide_message(self, entry: Entry, decided: Replacement | None, events: list[dict[str, Any]]) -> Shown:
        """A user, assistant, custom or summary message: as it is, or, when what of it can be
        archived exceeds `maxInlineUserTokens` (text, thinking, tool-call arguments, a large extra
        field or block), archived exactly and shown as its preview (the checkpoint primitive)."""
        if decided is not None:
            if decided.action == "oversized":
                self.extra_visible[entry.key] = checkpoint_keys(_archived_text(entry))
            return self._apply(entry, decided)
        assert self.budget is not None
        reducible = sizing_tokens(_user_text(entry) if entry.is_user else entry.text) + beyond_slack_tokens(entry.raw)
        if reducible <= self.budget.max_inline_user:
            return Shown(entry, entry.raw, entry.tokens)
        text = _archived_text(entry)
        with durable_writes(self.host.conn):
            archived = archive_checkpoint(self.admit, self.project, self.session_key, text, entry.timestamp)
        shown_text = _naming(archived["preview"], archived["rootId"])
        decision = Replacement(
            "oversized", archived["rootId"], shown_text, shown_tokens(with_text(entry, shown_text)), self.epoch.epoch
        )
        self._record(entry, decision, archived["version"])
        self.extra_visible[entry.key] = checkpoint_keys(text)
        events.append(
            {
                "type": "oversized-archived",
                "messageKey": entry.key,
                "role": entry.role,
                "documentId": archived["rootId"],
                "bytes": len(text.encode("utf-8")),
                "previewTokens": archived["previewTokens"],
                "pendingParts": archived["pendingParts"],
            }
        )
        return self._apply(entry, decision)

    def _signature(self, entry: Entry) -> tuple[str, str, str]:
        content = blake3.blake3(_visible_text(entry).encode("utf-8")).hexdigest()
        if entry.role == "bashExecution":
            return ("bash", str(entry.raw.get("command")), content)
        name, arguments = self.calls.get(entry.tool_call_id or "", (entry.tool_name or "", ""))
        return (entry.tool_name or name, arguments, content)

    def _decide_tool(self, entry: Entry, decided: Replacement | None, events: list[dict[str, Any]]) -> Shown:
        assert self.budget is not None
        signature = self._signature(entry)
        if decided is not None:
            shown = self._apply(entry, decided)
        else:
            shown = self._decide_new_tool(entry, signature, events)
        if shown.action == "inline":
            self.tool_tokens += shown.tokens
        self.signatures.setdefault(signature, shown)
        return shown

    def _decide_new_tool(self, entry: Entry, signature: tuple[str, str, str], events: list[dict[str, Any]]) -> Shown:
        budget = self.budget
        assert budget is not None
        earlier = self.signatures.get(signature) if budget.dedup and entry.tokens > DEDUP_MIN_TOKENS else None
        over_gate = self.tool_tokens >= budget.tool_budget and entry.tokens > budget.tool_floor
        if earlier is None and entry.tokens <= budget.max_tool_tokens and not over_gate:
            decision = Replacement("inline", None, None, entry.tokens, self.epoch.epoch)
            self._record(entry, decision, None)
            return self._apply(entry, decision)
        document_id, version = archive_tool_result(self.admit, self.scope, entry, _archived_text(entry))
        if earlier is not None:
            call = earlier.entry.tool_call_id or earlier.entry.key
            where = f", archived as {earlier.document_id}" if earlier.document_id else ""
            text = (
                f"[duplicate tool result: the same output as the earlier {entry.tool_name or 'tool'} call {call}"
                f"{where}, still in this context; this one is archived as {document_id}]"
            )
            action = "duplicate"
        else:
            text = _output_preview(entry, document_id)
            action = "preview"
        decision = Replacement(action, document_id, text, shown_tokens(with_text(entry, text)), self.epoch.epoch)
        self._record(entry, decision, version)
        events.append(
            {
                "type": "externalized",
                "messageKey": entry.key,
                "documentId": document_id,
                "action": action,
                "tokens": entry.tokens,
                "shownTokens": decision.tokens,
            }
        )
        return self._apply(entry, decision)

    # -- hints ---------------------------------------------------------------------------------

    def _hint(self, shown: Shown, latest: bool, events: list[dict[str, Any]]) -> None:
        """Preflight for the latest user message (first sight); an older one freezes no hint."""
        entry = shown.entry
        request = {**self.scope, "messageKey": entry.key, "text": _user_text(entry)[:PREFLIGHT_QUERY_CHARS]}
        conn, now = self.host.conn, self.host.clock()
        if not latest:
            preflight.freeze_empty(conn, request, "historical-message", now)
            return
        request["activeMessageKeys"] = list(self.view.user_keys)
        request["excludeVisibleSourceKeys"] = self.visible_keys()
        try:
            found = preflight.preflight(conn, request, self.host.settings, now)
        except Exception as exc:  # a hint is never worth a failed turn: freeze "none" and go on
            events.append({"type": "preflight-failed", "messageKey": entry.key, "error": type(exc).__name__})
            try:
                preflight.freeze_empty(conn, request, "preflight-error", now)
            except Exception:
                pass  # not frozen: this process still shows nothing for the key (no record → no hint)
            return
        if found["modelVisibleText"]:
            self.view.add_hint(shown, found["modelVisibleText"], _hint_sources(found))
        diagnostics = found["diagnostics"]
        events.append(
            {
                "type": "hint",
                "messageKey": entry.key,
                "outcome": diagnostics["outcome"],
                "reason": diagnostics["reason"],
                "tokens": diagnostics["metrics"].get("tokens", 0),
            }
        )

    def visible_keys(self) -> list[str]:
        """Message keys of every source the provider can still see (newest kept within the limit)."""
        keys = self.view.keys
        if self.extra_visible:
            keys = [k for key in keys for k in (key, *self.extra_visible.get(key, ()))]
        return keys[-MAX_VISIBLE_KEYS:]

    # -- rotation ------------------------------------------------------------------------------

    def _boundary(self, arriving: Shown, events: list[dict[str, Any]]) -> None:
        """At a user message's first sight: rotate first if the epoch is due."""
        budget = self.budget
        assert budget is not None
        tokens = self.view.tokens + arriving.tokens
        turns = len(self.view.user_keys)
        queued = bool(self.epoch.flags.get("rotationQueued"))
        if not self.view.shown or not (tokens >= budget.target or turns >= budget.rotation_turns or queued):
            return
        reason = "forced" if queued else "tokens" if tokens >= budget.target else "turns"
        if reason != "tokens" and len(groups([s.entry for s in self.view.shown])) <= budget.retain_turns:
            if queued:  # nothing beyond what a rotation keeps: the request is spent
                self.epoch.flags["rotationQueued"] = False
                self._save(self.epoch)
            return
        self._rotate(arriving, reason, events)

    def _rotate(self, arriving: Shown, reason: str, events: list[dict[str, Any]]) -> None:
        budget = self.budget
        assert budget is not None
        previous = groups([s.entry for s in self.view.shown])
        by_key = {s.entry.key: s for s in self.view.shown}
        wanted = min(budget.retain_turns, len(previous))
        candidates = previous[len(previous) - wanted :]
        for group in candidates:  # rebalance: retained output above the floor becomes a preview
            for entry in group:
                shown = by_key[entry.key]
                if entry.role in TOOL_ROLES and shown.action == "inline" and shown.tokens > budget.tool_floor:
                    by_key[entry.key] = self._rebalance(shown, events)
        sizes = [sum(by_key[e.key].tokens + by_key[e.key].hint_tokens for e in g) for g in previous]
        kept, checkpoint_needed = _retained(sizes, arriving.tokens, budget.target, wanted)
        removed = previous[: len(previous) - kept]
        archived_ids = self._archive_groups(removed, followed=True)
        retained = [by_key[e.key] for g in previous[len(previous) - kept :] for e in g]
        self._new_epoch(
            retained[0].entry.key if retained else arriving.entry.key, reason, kept, wanted, checkpoint_needed
        )
        self.view = ProviderCopy(retained)
        self.tool_tokens = sum(s.tokens for s in retained if s.entry.role in TOOL_ROLES and s.action == "inline")
        self.signatures = {}
        for shown in retained:
            if shown.entry.role in TOOL_ROLES:
                self.signatures.setdefault(self._signature(shown.entry), shown)
        self._announce_rotation(reason, kept, wanted, checkpoint_needed, len(removed), archived_ids, events)

    def _new_epoch(self, cut_key: str, reason: str, kept: int, wanted: int, checkpoint_needed: bool) -> None:
        """Start the next epoch at `cut_key` (saved with the turn's decisions)."""
        flags = {
            "emergency": {"kept": kept, "wanted": wanted} if kept < wanted else None,
            "checkpointNeeded": checkpoint_needed,
            "rotationQueued": False,
            "reason": reason,
            "compactionKey": self.epoch.flags.get("compactionKey"),
        }
        self._save(EpochRow(self.epoch.epoch + 1, cut_key, flags))

    def _announce_rotation(
        self,
        reason: str,
        kept: int,
        wanted: int,
        checkpoint_needed: bool,
        removed: int,
        archived: list[str],
        events: list[dict[str, Any]],
        **extra: Any,
    ) -> None:
        event: dict[str, Any] = {
            "type": "rotated",
            "epoch": self.epoch.epoch,
            "reason": reason,
            "retainedGroups": kept,
            "removedGroups": removed,
            "archived": archived,
            **extra,
        }
        if kept < wanted:
            event["emergencyRetention"] = {"kept": kept, "wanted": wanted}
            events.append({"type": "emergency-retention", "kept": kept, "wanted": wanted})
        events.append(event)
        if checkpoint_needed:
            events.append(
                {"type": "checkpoint-needed", "reason": "a single interaction group exceeds the rotation target"}
            )

    def _rebalance(self, shown: Shown, events: list[dict[str, Any]]) -> Shown:
        entry = shown.entry
        document_id, version = archive_tool_result(self.admit, self.scope, entry, _archived_text(entry))
        text = _output_preview(entry, document_id)
        decision = Replacement("preview", document_id, text, shown_tokens(with_text(entry, text)), self.epoch.epoch + 1)
        self._record(entry, decision, version, update=True)
        events.append(
            {
                "type": "externalized",
                "messageKey": entry.key,
                "documentId": document_id,
                "action": "rebalanced",
                "tokens": entry.tokens,
                "shownTokens": decision.tokens,
            }
        )
        return self._apply(entry, decision)

    def _shown_texts(self) -> dict[str, str]:
        return {s.entry.key: serialize(s.message, "message")[1] for s in self.view.shown if s.action != "inline"}

    def _archive_groups(
        self,
        chosen: list[list[Entry]],
        followed: bool,
        settled: bool = False,
        shown: dict[str, str] | None = None,
        after_group: Callable[[], None] | None = None,
        admit: Admit | None = None,
    ) -> list[str]:
        """Archive groups as turn documents (once each); their document ids. `shown`: the text the
        provider saw of replaced messages [default: this engine's provider copy]; `admit`: how
        [default: `self.admit`]."""
        admit = admit or self.admit
        shown = self._shown_texts() if shown is None else shown
        ids: list[str] = []
        for index, group in enumerate(chosen):
            mark = (group[0].key, group[-1].key)
            is_last = index == len(chosen) - 1
            if mark in self.archived or not group_complete(group, followed or not is_last, settled):
                continue
            documents = archive_group(admit, self.scope, group, shown, self._grown_from(group[0].key))
            with write_transaction(self.host.conn):
                session_state.record_turn(
                    self.host.conn, self.session, mark[0], mark[1], [d["rootId"] for d in documents], self.host.clock()
                )
            self.archived.add(mark)
            ids.extend(d["rootId"] for d in documents)
            if after_group is not None:
                after_group()
        return ids

    def _grown_from(self, first_key: str) -> dict[str, Any] | None:
        """The live single turn document an earlier, shorter archive of this group made, which
        the grown group's document supersedes (so search finds the group once)."""
        earlier = session_state.previous_turn(self.host.conn, self.lineage, first_key)
        if len(earlier) != 1:
            return None
        try:
            found = find_document(self.host.conn, earlier[0], None)
        except NotFound:
            return None
        return {"documentId": found["documentId"], "version": found["version"]} if found["state"] == "live" else None

    # -- host calls ----------------------------------------------------------------------------

    def settle(self, aborted: bool) -> list[str]:
        """Archive every complete group of the epoch not archived yet (an interrupted tail stays
        out). Groups before the epoch are archived already, or wait in the backlog for idle time.
        Indexed now: settling runs between turns (no model call waits on it), and its documents
        hold previews of what was externalized, so they are small; a worker indexing them instead
        would contend with the next user message's preflight."""
        start = self.view.shown[0].entry.index if self.view.shown else len(self.entries)
        return self._archive_groups(
            groups(self.entries[start:]), followed=False, settled=not aborted, admit=self.admit_inline
        )

    def archive_history(
        self, messages: list[Any], settled: bool, after_group: Callable[[], None] | None = None
    ) -> list[str]:
        """A client's transcript (an import, a hook of a client cwa does not sit in front of):
        every complete group archived as its own turn document(s), as rotation archives them,
        once; the last group only when the client `settled` after it (its turn is over). No
        provider copy is built and no hint decided: the client showed its own."""
        new = unique_keys(entries_of(messages, len(self.entries)), self.taken)
        for entry in new:
            self.digest = chain_digest(self.digest, entry.key)
        self.entries.extend(new)
        shown = decided_texts(self.host.conn, self.lineage, self.entries)
        # the client says whether its last turn is over; its own stop reasons may differ from Pi's
        return self._archive_groups(
            history_groups(self.entries), followed=settled, shown=shown, after_group=after_group
        )

    def queue_rotation(self) -> None:
        self.epoch.flags["rotationQueued"] = True
        self._save(self.epoch)

    def provider_copy(self) -> list[dict[str, Any]]:
        return self.view.messages

    def status(self) -> dict[str, Any]:
        budget = self.budget
        view = self.view
        turns, tokens = len(view.user_keys), view.tokens
        flags = self.epoch.flags
        return {
            "epoch": self.epoch.epoch,
            "turns": turns,
            "tokens": tokens,
            "messages": len(self.entries),
            "providerMessages": len(view.messages),
            "limits": budget.limits() if budget else None,
            "level": budgets.level(tokens, turns, budget) if budget else None,
            "emergencyRetention": flags.get("emergency"),
            "checkpointNeeded": bool(flags.get("checkpointNeeded")),
            "rotationQueued": bool(flags.get("rotationQueued")),
            "externalized": view.actions["preview"] + view.actions["duplicate"],
            "oversized": view.actions["oversized"],
            "hintTokens": view.hint_tokens,
            "toolResultTokens": self.tool_tokens,
            "backlogMessages": sum(len(g) for g in self.backlog),
            "digest": self.digest,
        }


class Engines:
    """The engines of the sessions one process serves, most recently used kept in memory."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.live: OrderedDict[tuple[str, str], SessionEngine] = OrderedDict()

    def get(self, project: str, session: str) -> SessionEngine | None:
        engine = self.live.get((project, session))
        if engine is not None:
            self.live.move_to_end((project, session))
        return engine

    def fresh(self, project: str, session: str, parent: str | None) -> SessionEngine:
        engine = SessionEngine(self.host, project, session, parent)
        self.live[(project, session)] = engine
        self.live.move_to_end((project, session))
        while len(self.live) > ENGINES_IN_MEMORY:
            _, dropped = self.live.popitem(last=False)
            dropped.catch_up()  # its backlog is not left behind with it
        return engine

    def history(
        self,
        project: str,
        session: str,
        parent: str | None,
        messages: list[Any],
        settled: bool,
        after_group: Callable[[], None] | None = None,
    ) -> tuple[list[str], list[str]]:
        """Archive a client's transcript (SessionEngine.archive_history; `after_group` runs after
        each archived group): the new documents' ids and every message's key. The engine is not
        kept: that client holds its own context."""
        engine = SessionEngine(self.host, project, session, parent)
        return engine.archive_history(messages, settled, after_group), [e.key for e in engine.entries]

    def drop(self, project: str, session: str) -> None:
        self.live.pop((project, session), None)

    def catch_up(self, seconds: float | None = None) -> bool:
        """Archive the sessions' backlogs, oldest engine first, for about `seconds` (None: all);
        whether any is left. A host process calls it between requests and before it ends."""
        started = time.monotonic()
        for engine in list(self.live.values()):
            left = None if seconds is None else max(0.0, seconds - (time.monotonic() - started))
            if engine.backlog and engine.catch_up(left) and seconds is not None:
                return True
        return any(engine.backlog for engine in self.live.values())

    def context(self, request: dict[str, Any]) -> dict[str, Any]:
        project, session = request["project"], request["sessionId"]
        engine = self.get(project, session)
        base = request.get("baseDigest")
        parsed = None
        if base is not None:
            engine = self._extending(engine, base)
        else:
            parsed = entries_of(request["messages"])  # a malformed message is refused before any write
            engine = self.fresh(project, session, request.get("parentSessionId"))
        budget = Budget.of(
            request.get("model", {}), request.get("reserveTokens"), self.host.settings, request.get("settings", {})
        )
        events: list[dict[str, Any]] = []
        try:
            self._extended(engine, request["messages"], budget, events, parsed)
        except DecidedElsewhere:
            if base is not None:  # the prefix this delta extends is gone with the engine
                raise
            events.clear()
            engine = self.fresh(project, session, request.get("parentSessionId"))  # now from what is stored
            self._extended(engine, request["messages"], budget, events, entries_of(request["messages"]))
        return self._answer(engine, request.get("answer", "full"), events)

    def _extended(
        self,
        engine: SessionEngine,
        messages: list[Any],
        budget: Budget,
        events: list[dict[str, Any]],
        parsed: list[Entry] | None = None,
    ) -> None:
        """`engine.extend`; an engine it fails half-way through is dropped (the next call resends)."""
        try:
            engine.extend(messages, budget, events, parsed)
        except BaseException:
            self.drop(engine.project, engine.session_key)
            raise

    @staticmethod
    def _extending(engine: SessionEngine | None, base: str) -> SessionEngine:
        """The engine a delta extends, when it holds exactly the prefix the host names."""
        if engine is None or engine.digest != base:
            raise Conflict(
                "the engine does not hold the transcript this delta extends; send every message once",
                reason="resync-required",
                digest=engine.digest if engine else None,
            )
        return engine

    def _answer(self, engine: SessionEngine, mode: str, events: list[dict[str, Any]]) -> dict[str, Any]:
        copy = engine.provider_copy()
        result: dict[str, Any] = {
            "digest": engine.digest,
            "count": len(engine.entries),
            "status": engine.status(),
            "events": events,
        }
        if mode == "delta":
            keep = engine.returned[1] if engine.returned and engine.returned[0] == engine.epoch.epoch else 0
            result["delta"] = {"keep": keep, "append": copy[keep:]}
        else:
            result["messages"] = list(copy)
        engine.returned = (engine.epoch.epoch, len(copy))
        return result

    def settled(self, request: dict[str, Any]) -> dict[str, Any]:
        """Archive the completed groups of the transcript this process holds (or of `messages`)."""
        project, session = request["project"], request["sessionId"]
        engine = self.get(project, session)
        if request.get("baseDigest") is not None:  # the messages that followed the last call
            engine = self._extending(engine, request["baseDigest"])
            budget = engine.budget or Budget.of({}, None, self.host.settings, {})
            self._extended(engine, request.get("messages", []), budget, [])
        elif request.get("messages") is not None:
            parsed = entries_of(request["messages"])  # a malformed message is refused before any write
            engine = self.fresh(project, session, request.get("parentSessionId"))
            self._extended(engine, request["messages"], Budget.of({}, None, self.host.settings, {}), [], parsed)
        if engine is None:
            return {"archived": [], "known": False, "status": None, "digest": None, "count": 0}
        return {
            "archived": engine.settle(bool(request.get("aborted"))),
            "known": True,
            "status": engine.status(),
            "digest": engine.digest,
            "count": len(engine.entries),
        }

    def rotate(self, request: dict[str, Any]) -> dict[str, Any]:
        """Queue a rotation for the session's next user message."""
        project, session = request["project"], request["sessionId"]
        engine = self.get(project, session) or SessionEngine(
            self.host, project, session, request.get("parentSessionId")
        )
        engine.queue_rotation()
        return {"rotationQueued": True, "status": engine.status()}

    def status(self, request: dict[str, Any]) -> dict[str, Any]:
        """The footer facts: from memory when this process serves the session, else what the
        archive records (turns and tokens only with the transcript); nothing is written."""
        project, session = request["project"], request["sessionId"]
        engine = self.get(project, session)
        lag = {"indexQueue": index_queue.lag(self.host.conn, self.host.clock(), project)}
        if engine is not None:
            return {"inMemory": True, **engine.status(), **lag}
        return {**recorded_status(self.host.conn, request, self.host.settings), **lag}

    def with_visible(self, request: dict[str, Any]) -> dict[str, Any]:
        """A search request of a session this process serves also excludes what its provider
        copy still shows."""
        engine = self.get(request.get("project") or "", request["sessionId"])
        if engine is None:
            return request
        visible = list(dict.fromkeys([*request.get("excludeVisibleSourceKeys", []), *engine.visible_keys()]))
        return {**request, "excludeVisibleSourceKeys": visible[-MAX_VISIBLE_KEYS:]}
