"""Automatic preflight: at most one small, labelled hint after a user message, or nothing.

Runs once per (project, session, message key). The first call finds candidates (exact anchors and
BM25F only: no embeddings, no reranker, no model), lets the continuity policy decide, renders the
hint within both budgets, and freezes the result in the hint ledger; every later call for the key
returns the same bytes. Revealed sources go into the exposure ledger and stay cooled down for
`hintSourceCooldownHours` across the session's lineage. Search leases are never taken here and
hints never carry locators.

Budgets (estimator: cwa/tokens.py): one hint costs at most `hintBudgetTokens`; the frozen hints of
all keys in `activeMessageKeys` (plus this one) cost at most `activeHintBudgetTokens`. A key that
leaves the active set frees its share; a key never gets a second decision.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import apsw
import blake3
import orjson

from cwa import limits
from cwa.config import Settings
from cwa.errors import CwaError, NotFound
from cwa.index.structure import is_request
from cwa.index.terms import terms, tokens
from cwa.retrieve import calibration, hint_text, ranker, restatement
from cwa.retrieve.candidate import Candidate
from cwa.retrieve.context import Context, make_context, scope_frequencies, scope_holds_terms, specific_in_scope
from cwa.retrieve.continuity import (
    MARKER,
    MARKER_MIN_IDF,
    MARKER_MIN_SHARE,
    SNIPPET,
    SNIPPET_MIN_SHARE,
    SUPPRESS,
    UNIQUE_WORD_IDF,
    UNIQUE_WORD_MIN_TERMS,
    Decision,
    Evidence,
    Policy,
    decide,
    weighed_share,
)
from cwa.retrieve.filler import FILLER_TERMS
from cwa.retrieve.intent import FIX_WORDS, HISTORICAL_WORDS, answer_unit_words, asks_for_fix, cues
from cwa.retrieve.scope import resolve_scope
from cwa.retrieve.search import Stages, answer_terms, find_candidates
from cwa.store import exposure_ledger, hint_ledger
from cwa.store.connection import BOOKKEEPING_SKIPPED, brief_wait, write_transaction
from cwa.store.reads import read_bytes
from cwa.store.sessions import ensure_project, ensure_session, lineage_rows
from cwa.store.sqlfiles import queries
from cwa.timestamps import age_days
from cwa.tokens import estimate_tokens

CANDIDATE_POOL = 3  # per tier: enough for the top candidate and its nearest rivals
VISIBLE_EXTRA = 3  # more per tier when some sources may be visible (flagged, not excluded)
# An exact hit's coverage counts the message's words within this reach of the anchor (more than a
# default 160-token snippet centred there shows), not those of a whole tool output.
COVERAGE_REACH_CHARS = 1_500
IGNORED_TERMS = frozenset(t for word in HISTORICAL_WORDS for t in terms(word))
AGE_LIMIT_KEYS = {
    "ephemeral": "ephemeralAutoRetrievalDays",
    "conversation": "conversationAutoRetrievalDays",
    "derived": "derivedAutoRetrievalDays",
}


@dataclass(frozen=True)
class Budgets:
    """The request's budgets and cooldown: its `policy` overrides, else the settings."""

    budget: int
    active_budget: int
    cooldown_hours: int

    @classmethod
    def of(cls, overrides: dict[str, Any], settings: Settings) -> Budgets:
        return cls(
            overrides.get("hintBudgetTokens", settings["hintBudgetTokens"]),
            overrides.get("activeHintBudgetTokens", settings["activeHintBudgetTokens"]),
            overrides.get("hintSourceCooldownHours", settings["hintSourceCooldownHours"]),
        )


def preflight(conn: apsw.Connection, request: dict[str, Any], settings: Settings, now: str) -> dict[str, Any]:
    project, session_key, key = request["project"], request["sessionId"], request["messageKey"]
    session = hint_ledger.session_row(conn, project, session_key)
    frozen = hint_ledger.find_hint(conn, session, key) if session is not None else None
    if frozen is not None:
        return _replay(conn, session, key, frozen, now)

    overrides = request.get("policy", {})
    policy = Policy(
        {cls: settings[name] for cls, name in AGE_LIMIT_KEYS.items()},
        snippets=overrides.get("snippets", True),
        markers=overrides.get("markers", True),
        snippet_min_share=overrides.get("snippetMinShare", SNIPPET_MIN_SHARE),
        marker_min_share=overrides.get("markerMinShare", MARKER_MIN_SHARE),
    )
    bounds = Budgets.of(overrides, settings)
    enabled = policy.snippets or policy.markers
    found: list[tuple[Evidence, Candidate]] = []
    failed = False
    if enabled and bounds.budget > 0 and bounds.active_budget > 0:
        try:
            found = _evidence(conn, request, settings, now)
        except CwaError:
            raise
        except Exception:  # an empty decision is frozen: a later recovery may never add bytes
            failed = True

    active = [k for k in dict.fromkeys(request.get("activeMessageKeys", [])) if k != key]
    with write_transaction(conn):
        session = ensure_session(
            conn, ensure_project(conn, project, now), session_key, request.get("parentSessionId"), now
        )
        frozen = hint_ledger.find_hint(conn, session, key)
        if frozen is not None:  # another process decided first
            return _replay(conn, session, key, frozen, now)
        lineage = lineage_rows(conn, session)
        used = hint_ledger.active_tokens(conn, lineage, active)
        cooled = set()
        if bounds.cooldown_hours:
            cooled = exposure_ledger.recently_surfaced(conn, lineage, (e.source for e, _ in found), now)
        evidence = [replace(e, recently_surfaced=e.source in cooled) for e, _ in found]

        message = request["text"][: limits.PREFLIGHT_QUERY_CHARS]
        if failed:
            decision = Decision(SUPPRESS, "preflight-error")
        elif not enabled:
            decision = Decision(SUPPRESS, "hints-disabled")
        elif bounds.budget <= 0 or bounds.active_budget <= 0:
            decision = Decision(SUPPRESS, "hint-budget")
        else:
            decision = _decide(conn, message, evidence, [c for _, c in found], policy)
        allowance = min(bounds.budget, bounds.active_budget - used)
        text, decision = _render(decision, {e.source: c for e, c in found}, allowance)
        response = _response(conn, message, decision, text, evidence, used, bounds, now)
        _record(conn, session, key, request["text"], decision, response, bounds, now)
        hint_ledger.touch_active(conn, session, active, now)
    return response


def freeze_empty(conn: apsw.Connection, request: dict[str, Any], reason: str, now: str) -> None:
    """Freeze "no hint" for a message without looking for one (a message the session engine
    meets only in an older part of a transcript, or one whose preflight failed): a later call can
    never add bytes after it."""
    project, session_key, key = request["project"], request["sessionId"], request["messageKey"]
    with write_transaction(conn):
        session = ensure_session(
            conn, ensure_project(conn, project, now), session_key, request.get("parentSessionId"), now
        )
        if hint_ledger.find_hint(conn, session, key) is not None:
            return
        decision = Decision(SUPPRESS, reason)
        bounds = Budgets(0, 0, 0)
        _record(
            conn,
            session,
            key,
            request["text"],
            decision,
            _response(conn, "", decision, "", [], 0, bounds, now),
            bounds,
            now,
        )


def _record(
    conn: apsw.Connection,
    session: int,
    key: str,
    message: str,
    decision: Decision,
    response: dict[str, Any],
    bounds: Budgets,
    now: str,
) -> None:
    """Freeze the decision in the hint ledger; put what it revealed in the exposure ledger."""
    text = response["modelVisibleText"]
    record = {
        "queryHash": blake3.blake3(message.encode("utf-8")).hexdigest(),
        "generation": response["diagnostics"]["generation"],
        "outcome": decision.outcome,
        "reason": decision.reason,
        "text": text,
        "tokens": estimate_tokens(text),
        "source": decision.chosen.source if text and decision.chosen else None,
        "response": {k: v for k, v in response.items() if k != "modelVisibleText"},
    }
    hint_id = hint_ledger.record_hint(conn, session, key, record, now)
    if text:
        revealed = decision.supporting if decision.outcome == MARKER else (decision.chosen.source,)
        exposure_ledger.record_exposures(conn, session, hint_id, revealed, now, bounds.cooldown_hours)


def _replay(conn: apsw.Connection, session: int, key: str, frozen: hint_ledger.Frozen, now: str) -> dict[str, Any]:
    """The frozen bytes again; the key's activity is noted at most once a day."""
    if frozen.stale(now) and conn.get_autocommit():
        try:
            with brief_wait(conn), write_transaction(conn):
                hint_ledger.touch_active(conn, session, [key], now)
        except BOOKKEEPING_SKIPPED:
            pass  # bookkeeping never costs a replay
    stored = frozen.response
    return {"modelVisibleText": frozen.text, **stored, "diagnostics": {**stored["diagnostics"], "frozen": True}}


def _evidence(
    conn: apsw.Connection, request: dict[str, Any], settings: Settings, now: str
) -> list[tuple[Evidence, Candidate]]:
    """Candidates in rank order with the evidence the policy needs. Sources still visible to the
    model are found too and flagged (not left out), so a visible best match blocks with
    `already-visible` instead of letting a weaker copy of the same concept through."""
    scope = resolve_scope(conn, "project", request["project"], request["sessionId"], settings["maxReadScope"])
    if scope.empty:
        return []
    own = [request["messageKey"]]  # the message itself, should the host have archived it already
    ctx = make_context(conn, scope, own, now, request["sessionId"])
    ctx.include_superseded = True
    visible = request.get("excludeVisibleSourceKeys", [])
    pool = CANDIDATE_POOL + (VISIBLE_EXTRA if visible else 0)
    query = request["text"][: limits.PREFLIGHT_QUERY_CHARS]
    # Lexical evidence can only back a hint through a content term at least this specific, so
    # windows holding none of them are never fetched: preflight stays cheap on common words. A
    # term's specificity is measured within the project searched: other projects' words must not
    # make it common (or rare) here.

    def specific(term: str, frequency: int, _windows: int) -> bool:
        return term not in FILLER_TERMS and specific_in_scope(ctx, term, frequency, MARKER_MIN_IDF)

    ignored = IGNORED_TERMS | {t for word in answer_unit_words(query) for t in terms(word)}
    # own words only: a hint stands on what its source says, never on the turn before it
    _, qterms, stages = find_candidates(ctx, query, pool, ignored, specific, context=False)
    ranked = [c for tier in stages.tiers() for c in tier[: pool + 1]]  # the top and its nearest rivals
    pool = _ranked_pool(ctx, stages, qterms, settings, query)
    probability = {c.document_row: c.order for c in pool.candidates} if pool else {}
    # a reply saying back a user's message among them is that message (cwa/retrieve/restatement.py)
    lexical = [c for c in ranked if c.mode == "lexical"]
    echoes = restatement.restatements(conn, lexical, query, pool.before) if pool else set()
    copies = [c for c in ranked if c.document_row in echoes]
    ranked = [c for c in ranked if c.document_row not in echoes]
    df, total = scope_frequencies(ctx, sorted({t for c in ranked if c.mode == "lexical" for t in c.matched}))
    for copy in copies:  # its words are the message's: no commoner for being said back
        for term in copy.matched:
            df[term] = max(1, df.get(term, 1) - 1)
    idf = {t: calibration.specificity(df[t], total) for t in df}
    content = [t for t in qterms if t not in FILLER_TERMS]
    shown = frozenset(visible)
    found = [(_source_evidence(conn, c, content, idf, shown, now, probability.get(c.document_row)), c) for c in ranked]
    unique = [e.mode == "lexical" and e.max_idf >= UNIQUE_WORD_IDF for e, _ in found]
    if any(unique) and scope_holds_terms(ctx, UNIQUE_WORD_MIN_TERMS):  # a long history: such a word names a subject
        found = [(replace(e, unique_word=True) if u else e, c) for (e, c), u in zip(found, unique)]
    # Among exact hits, more of the message's anchors first, then more of its words around them.
    exact = sorted((f for f in found if f[0].mode == "exact"), key=lambda f: (-len(f[0].anchors), -f[0].coverage))
    return exact + [f for f in found if f[0].mode != "exact"]


_FIX_TERMS = frozenset(answer_terms(tuple(FIX_WORDS)))
FIX_SCAN_BYTES = 64 * 1024  # of a source's conversation, read for a fix's words


def _decide(
    conn: apsw.Connection,
    message: str,
    evidence: list[Evidence],
    candidates: list[Candidate],
    policy: Policy,
) -> Decision:
    """continuity.decide over `evidence` (`candidates[i]` is the candidate of `evidence[i]`).
    Asked how a problem was solved, a snippet's source must state a fix (decide's last check):
    only the source chosen is read for it, then decided again with that one fact known, which
    changes nothing but that check's outcome."""
    decision = decide(message, evidence, policy)
    if decision.outcome != SNIPPET or not asks_for_fix(message):
        return decision
    chosen = next(i for i, e in enumerate(evidence) if e is decision.chosen)
    try:
        states = _states_fix(conn, candidates[chosen])
    except CwaError:
        raise
    except Exception:  # as when finding the evidence failed: no hint, frozen
        return Decision(SUPPRESS, "preflight-error")
    known = replace(evidence[chosen], states_fix=states)
    return decide(message, [known if i == chosen else e for i, e in enumerate(evidence)], policy)


def _states_fix(conn: apsw.Connection, candidate: Candidate) -> bool:
    """Asked how a problem was solved: whether the source states a fix, in the evidence itself or
    in what the user or the assistant say in it (the turn that reported a problem may also hold the
    reply that fixed it; a tool's output is only what the evidence holds of it: a log mentions
    "fix" in passing)."""
    if not _FIX_TERMS.isdisjoint(terms(candidate.text)):
        return True
    left = FIX_SCAN_BYTES
    for start, end in conn.execute(queries("hints")["conversation_ranges"], (candidate.document_row,)):
        data, _ = read_bytes(conn, candidate.document_row, start, min(end, start + left))
        if not _FIX_TERMS.isdisjoint(terms(data.decode("utf-8", errors="replace"))):
            return True
        left -= len(data)
        if left <= 0:
            break
    return False


def _source_evidence(
    conn: apsw.Connection,
    candidate: Candidate,
    content: list[str],
    idf: dict[str, float],
    visible: frozenset[str],
    now: str,
    probability: float | None,
) -> Evidence:
    kind, retention_class, created_at, state, tool_output, keys = conn.execute(
        queries("hints")["source_facts"],
        {"row": candidate.document_row, "start": candidate.start, "end": candidate.end},
    ).fetchone()
    is_visible = bool(visible) and any(key in visible for key in orjson.loads(keys))
    facts = {
        "source": candidate.document_row,
        "mode": candidate.mode,
        "kind": kind,
        "retention_class": retention_class,
        "age_days": round(age_days(created_at, now), 3),
        "created_at": created_at,
        "tool_output": bool(tool_output),
        "superseded": state == "superseded",
        "visible": bool(is_visible),
    }
    if candidate.mode == "lexical":
        return Evidence(**facts, **_lexical_evidence(candidate, content, idf), probability=probability)
    near = candidate.text[max(0, candidate.center - COVERAGE_REACH_CHARS) : candidate.center + COVERAGE_REACH_CHARS]
    held = {token.term for token in tokens(near)}
    coverage = round(sum(t in held for t in content) / len(content), 4) if content else 0.0
    return Evidence(
        **facts, score=candidate.score, coverage=coverage, max_idf=candidate.max_idf, anchors=tuple(candidate.anchors)
    )


def _ranked_pool(
    ctx: Context, stages: Stages, qterms: list[str], settings: Settings, message: str
) -> ranker.Pool | None:
    """The learned ranker's pool of the lexical candidates, each with its probability (`order`;
    lexical model, no neighbours fetched: preflight stays cheap); the message's cues read as
    search reads a query's. None without lexical candidates."""
    if not stages.ranked:
        return None
    weights = ranker.load(settings["rankerPath"])
    return ranker.order(
        ctx,
        stages.ranked,
        None,
        None,
        qterms,
        stages.taken(),
        weights,
        neighbors=False,
        cues=cues(message),
    )


def _closing_question(text: str) -> str:
    """The question a text ends with (its last sentence, when that ends with "?"), or ""."""
    stripped = text.rstrip()
    if not stripped.endswith("?"):
        return ""
    before = max(stripped.rfind(mark, 0, len(stripped) - 1) for mark in ".!?\n")
    return stripped[before + 1 :]


def _asks(text: str, matched: set[str]) -> bool:
    """Whether the source asks what the message asks rather than answering it: most of the
    message's words it holds are in the question it ends with (the answer is in the reply), a
    question that is not a request put as one ("could you use tabs?" says what the user wants)."""
    question = _closing_question(text)
    if not question or not matched or is_request(question):
        return False
    held = {token.term for token in tokens(question)} & matched
    return len(held) * 2 > len(matched)


def _lexical_evidence(candidate: Candidate, content: list[str], idf: dict[str, float]) -> dict[str, Any]:
    """Score, coverage, IDF and occurrences over the message's content terms (filler words match
    but say nothing about a concept); the score is search's calibrated formula on those terms."""
    matched = [t for t in candidate.matched if t not in FILLER_TERMS]
    held = set(matched)
    return {
        "score": calibration.lexical_score(content, matched),
        "coverage": round(len(matched) / len(content), 4) if content else 0.0,
        "max_idf": max((idf[t] for t in matched), default=0.0),
        "terms": tuple((t, idf[t]) for t in candidate.matched),
        "asks": _asks(candidate.text, held),
        "occurrences": (
            sum(candidate.occurrences.get(t, 0) for t in held)
            if candidate.occurrences
            else sum(1 for token in tokens(candidate.text) if token.term in held)
        ),
    }


def _render(decision: Decision, candidates: dict[int, Candidate], allowance: int) -> tuple[str, Decision]:
    """The hint's bytes within `allowance` tokens; a hint that cannot fit becomes `hint-budget`."""
    if decision.outcome == SUPPRESS:
        return "", decision
    chosen = decision.chosen
    if decision.outcome == SNIPPET:
        candidate = candidates[chosen.source]
        text = hint_text.render_snippet(
            candidate.text, candidate.center, chosen.created_at, chosen.tool_output, allowance
        )
        if text:
            return text, decision
    else:
        for count in range(len(decision.spans), 0, -1):  # fewer spans before giving up
            text = hint_text.render_marker(decision.spans[:count])
            if estimate_tokens(text) <= allowance:
                return text, replace(decision, spans=decision.spans[:count])
    return "", replace(decision, outcome=SUPPRESS, reason="hint-budget", spans=(), supporting=())


def _response(
    conn: apsw.Connection,
    message: str,
    decision: Decision,
    text: str,
    evidence: list[Evidence],
    used: int,
    bounds: Budgets,
    now: str,
) -> dict[str, Any]:
    """The hints and sanitized diagnostics: codes, numbers and ids, never archived text."""
    chosen = decision.chosen
    tokens = estimate_tokens(text)
    hints = []
    if text and chosen is not None:
        document_id, version = conn.execute(queries("hints")["document_identity"], (chosen.source,)).fetchone()
        hint: dict[str, Any] = {
            "type": decision.outcome,
            "tokens": tokens,
            "source": {
                "documentId": document_id,
                "version": version,
                "kind": chosen.kind,
                "retentionClass": chosen.retention_class,
                "createdAt": chosen.created_at,
                "toolOutput": chosen.tool_output,
            },
        }
        if decision.outcome == MARKER:
            hint["spans"] = list(decision.spans)
        hints.append(hint)
    metrics: dict[str, Any] = {
        "candidates": len(evidence),
        "historicalIntent": decision.historical,
        "tokens": tokens,
        "hintBudgetTokens": bounds.budget,
        "activeTokens": used + tokens,
        "activeHintBudgetTokens": bounds.active_budget,
    }
    if chosen is not None:
        metrics.update(
            mode=chosen.mode,
            score=chosen.score,
            margin=decision.margin,
            coverage=chosen.coverage,
            maxNormalizedIdf=chosen.max_idf,
            matchedTerms=len(chosen.terms) or len(chosen.anchors),
            ageClass=chosen.retention_class,
            ageDays=round(chosen.age_days, 1),
        )
        if chosen.probability is not None:
            metrics["probability"] = round(chosen.probability, 4)
            metrics["probabilityShare"] = round(weighed_share(message, chosen, evidence), 4)
    return {
        "modelVisibleText": text,
        "hints": hints,
        "diagnostics": {
            "outcome": decision.outcome,
            "reason": decision.reason,
            "metrics": metrics,
            "generation": conn.execute(queries("search")["latest_generation"]).fetchone()[0],
            "decidedAt": now,
            "frozen": False,
        },
    }


def explain(conn: apsw.Connection, request: dict[str, Any]) -> dict[str, Any]:
    """The stored decision for a message key (or the session's latest): outcome, reason and
    sanitized metrics. Never the hint's text, never archived text."""
    session = hint_ledger.session_row(conn, request["project"], request["sessionId"])
    found = hint_ledger.explain(conn, session, request.get("messageKey")) if session is not None else None
    if found is None:
        what = f"message {request['messageKey']!r}" if request.get("messageKey") else "this session"
        raise NotFound(f"no preflight decision is recorded for {what}", reason="no-decision")
    key, stored = found
    diagnostics = stored["diagnostics"]
    return {
        "messageKey": key,
        "outcome": diagnostics["outcome"],
        "reason": diagnostics["reason"],
        "decidedAt": diagnostics["decidedAt"],
        "generation": diagnostics["generation"],
        "metrics": diagnostics["metrics"],
        "hints": [{k: v for k, v in hint.items() if k != "spans"} for hint in stored["hints"]],
    }
