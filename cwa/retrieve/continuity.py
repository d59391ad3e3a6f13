"""The continuity policy: may automatic preflight show anything for this user message, and what?

A pure function of the message, its candidates (in rank order: exact tier, then lexical) and their
evidence. It returns one of three outcomes with a stable reason code:

- `historical-snippet` (`explicit-history-strong-evidence`): the user points at history and one
  candidate is strong (`_strong`: a lexical one by its score, coverage and specificity, or, in a
  long history, by a word of the message no other window holds and enough of the message beside it)
  and unambiguous — its score beats the next candidate of the same mode by
  more than SNIPPET_MARGIN (for exact anchors, weighed by how much of the message's content the
  evidence around the anchor holds; see `_support`), and, for a lexical candidate, it holds at
  least SNIPPET_MIN_SHARE of the lexical candidates' learned-ranker probability (see
  `probability_share`); otherwise `ambiguous-snippet`. A message asking how a problem was solved
  (intent.asks_for_fix) is answered only by a statement of the fix: a top candidate whose text
  holds no fix word shows the problem, not its solution (`unanswered-fix`). A source that asks
  what the message asks (`asks`, set by preflight) is neither shown nor a rival: its answer is in
  the reply; unless the message is about what was asked (intent.about_asking).
- `continuity-marker` (`implicit-concept-continuity`): a conversation source shares a concept with
  the message — a verbatim exact anchor of the message, or at least MARKER_MIN_TERMS matched terms
  in one window with coverage ≥ MARKER_MIN_COVERAGE and maximum specificity ≥ MARKER_MIN_IDF.
  Specificity is normalized IDF as a modest archive measures it (calibration.specificity), so the
  gates mean the same in a long history, counted within the project searched
  (context.scope_frequencies), so other projects' words do not move it. Coverage and IDF are
  taken over the message's content terms (everyday filler such as "could", "help", "here"
  neither counts against coverage nor names a concept); the matched terms may be
  distinct query terms or repeated occurrences of a content term, so a concept the earlier
  conversation returned to ("tablets … tablets") counts as well as two shared words; a message
  whose only content word is rare in the archive (specificity ≥ SOLE_TERM_MIN_IDF) needs it
  matched once.
  A marker only says shared history exists, so a score tie does not withhold it; but a lexical
  one stands only on a source holding MARKER_MIN_SHARE of the learned probability
  (`ambiguous-marker` otherwise). Its variable text is made of exact spans of the current
  message, nothing else.
- `suppress`, with the reason that stopped it (see REASONS).

Budget (`hint-budget`) is judged after rendering, by preflight, with the same reason table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cwa.index.exact import fold
from cwa.index.terms import tokens
from cwa.retrieve.filler import FILLER_TERMS, FILLER_WORDS
from cwa.retrieve.intent import about_asking, current_state_only, general_knowledge, historical_intent
from cwa.vocabulary import MARKER, SNIPPET, SUPPRESS

REASONS = (
    "no-candidate",
    "current-state-required",
    "general-knowledge",
    "source-ineligible",
    "weak-evidence",
    "ambiguous-snippet",
    "ambiguous-marker",
    "unanswered-fix",
    "explicit-history-strong-evidence",
    "implicit-concept-continuity",
    "recently-surfaced",
    "hint-budget",
    "superseded-source",
    "already-visible",
    "hints-disabled",
    "preflight-error",
    "source-redacted",  # a frozen hint whose source was redacted replays as nothing
)

SNIPPET_MARGIN = 0.05
SNIPPET_MIN_SHARE = 0.6  # a lexical snippet's share of the lexical candidates' learned probability
# A lexical marker's share of it: where the message's words are spread over several sources with
# none preferred, the marker named whichever ranked first, and that was the turn asked about less
# than half of the time (docs/evaluation.md, "Markers on the source the ranker prefers").
MARKER_MIN_SHARE = 0.6
STRONG_EXACT_SCORE = 0.75  # an error, path, URL, commit, quoted phrase or case-exact symbol
STRONG_LEXICAL_SCORE = 0.5
# A word of the message only one window of a long history holds (specificity 1.0: in a project
# of up to SPECIFICITY_REFERENCE_WINDOWS windows, no other; beyond, as rare as that) names what
# the user asks about; with this much of the message beside it, that window is strong evidence
# whatever its score. In a long history on one subject the message's other words are in many
# windows, so the score rule alone was almost never met there. Only in a scope of at least
# UNIQUE_WORD_MIN_TERMS indexed terms: in a shorter one everyday words ("lean", "visit", "main")
# are often said once, and the rule showed the wrong turn more often than the right one on
# LoCoMo's chats (6,148-11,815 terms each; a 100K-token coding history holds about 48,000:
# eval/perf/unique_word.py). Preflight sets `unique_word`.
UNIQUE_WORD_IDF = 1.0
UNIQUE_WORD_MIN_TERMS = 25_000
UNIQUE_WORD_COVERAGE = 0.5
MARKER_MIN_EXACT_SCORE = 0.65  # a value ("30 s", "8080") alone is too incidental to mark a concept
MARKER_MIN_TERMS = 2
MARKER_MIN_COVERAGE = 0.60
MARKER_MIN_IDF = 0.60
SOLE_TERM_MIN_IDF = 0.80  # a message's only content word, matched once, must be this rare
SPAN_MIN_IDF = 0.45  # a matched word shown in a marker must itself be fairly specific
MAX_MARKER_SPANS = 3
MAX_SPAN_CHARS = 80
MARKER_KINDS = frozenset({"turn", "preamble", "checkpoint-root", "checkpoint-part"})
NEVER_AUTOMATIC_KINDS = frozenset({"manual"})


@dataclass(frozen=True)
class Evidence:
    """One candidate source as the policy sees it: numbers and shapes, never archived text."""

    source: int  # document row; identifies the source, never rendered
    mode: str  # exact | lexical
    score: float  # calibrated, candidate-own (cwa/retrieve/calibration.py)
    coverage: float  # share of the message's content terms the window (exact: the message) holds
    max_idf: float  # lexical: highest specificity among matched content terms (calibration.specificity)
    kind: str
    retention_class: str
    age_days: float  # from the source's creation time
    created_at: str = ""  # the source's creation time (a snippet shows its date)
    terms: tuple[tuple[str, float], ...] = ()  # lexical: matched query terms and their specificity
    occurrences: int = 0  # lexical: occurrences of matched content terms in the window
    anchors: tuple[str, ...] = ()  # exact: matched anchors as written in the current message
    tool_output: bool = False  # the evidence includes tool output (quoted as data if shown)
    superseded: bool = False
    visible: bool = False  # still in the provider context
    recently_surfaced: bool = False  # revealed within the cooldown in this session's lineage
    probability: float | None = None  # lexical: the learned ranker's probability that it is the source asked for
    states_fix: bool | None = None  # whether its text holds a fix's words (intent.FIX_WORDS); None: not asked
    unique_word: bool = False  # lexical: holds a word of the message no other window of a long scope holds
    asks: bool = False  # lexical: most of the message's words it holds are in the question it ends with


@dataclass(frozen=True)
class Policy:
    age_limits: Mapping[str, int]  # retention class → automatic age limit in days (0: none)
    snippets: bool = True
    markers: bool = True
    snippet_min_share: float = SNIPPET_MIN_SHARE  # a request may override it
    marker_min_share: float = MARKER_MIN_SHARE  # and this one


@dataclass(frozen=True)
class Decision:
    outcome: str
    reason: str
    chosen: Evidence | None = None
    spans: tuple[str, ...] = ()  # a marker's variable text: exact spans of the message
    supporting: tuple[int, ...] = ()  # sources a marker stands on (all enter the exposure ledger)
    margin: float | None = None
    historical: bool = False


def answering(message: str, candidates: Sequence[Evidence]) -> list[Evidence]:
    """The candidates that may hold the message's answer: not one asking what it asks (`asks`: its
    answer is in the reply), unless the message is about what was asked (intent.about_asking)."""
    answered = about_asking(message)
    return [c for c in candidates if answered or not c.asks]


def weighed_share(message: str, chosen: Evidence, candidates: Sequence[Evidence]) -> float:
    """`probability_share` of a candidate among those that may answer the message, and itself
    (by its source: preflight's fix check decides again with a copy that knows one more fact)."""
    rivals = [c for c in answering(message, candidates) if (c.source, c.mode) != (chosen.source, chosen.mode)]
    return probability_share(chosen, [chosen, *rivals])


def decide(message: str, candidates: Sequence[Evidence], policy: Policy) -> Decision:
    historical = historical_intent(message)
    if not historical:
        if current_state_only(message):
            return Decision(SUPPRESS, "current-state-required")
        if general_knowledge(message):
            return Decision(SUPPRESS, "general-knowledge")
    if not candidates:
        return Decision(SUPPRESS, "no-candidate", historical=historical)

    fresh: list[Evidence] = []
    first_block: str | None = None  # why the best-ranked blocked candidate was left out
    for candidate in candidates:
        blocked = _blocked(candidate, policy)
        if blocked is None:
            fresh.append(candidate)
        elif first_block is None and not fresh:
            first_block = blocked
    if not fresh:
        return Decision(SUPPRESS, first_block or "no-candidate", historical=historical)

    top = fresh[0]
    # a source asking what the message asks would show the question, not its answer: no rival either
    answers = answering(message, candidates)
    strong = [c for c in fresh if _strong(c) and c in answers]
    if historical and policy.snippets and strong:
        top = strong[0]  # the best-ranked strong candidate: a weak anchor ahead of it does not hide it
        rivals = [
            _support(c) for c in answers if c is not top and c.mode == top.mode and not c.superseded and not c.visible
        ]
        margin = round(_support(top) - max(rivals, default=0.0), 4)
        if margin > SNIPPET_MARGIN and probability_share(top, answers) >= policy.snippet_min_share:
            if top.states_fix is False:
                return Decision(SUPPRESS, "unanswered-fix", top, margin=margin, historical=True)
            return Decision(SNIPPET, "explicit-history-strong-evidence", top, margin=margin, historical=True)
        return Decision(SUPPRESS, "ambiguous-snippet", top, margin=margin, historical=True)

    if policy.markers:
        backed = [(c, _marker_spans(message, c)) for c in fresh if _marker_evidence(c)]
        conversational = [(c, spans) for c, spans in backed if spans and _conversation_source(c)]
        preferred = [  # nor is it a marker's source: the marker stands on the reply, as a snippet would
            (c, s)
            for c, s in conversational
            if c in answers and probability_share(c, answers) >= policy.marker_min_share
        ]
        if preferred:
            chosen, spans = preferred[0]
            # every source sharing the concept enters the exposure ledger, preferred or not
            supporting = tuple(c.source for c, s in conversational if set(s) & set(spans))
            return Decision(MARKER, "implicit-concept-continuity", chosen, spans, supporting, historical=historical)
        if conversational:  # the concept is there, spread over sources none of which is preferred
            return Decision(SUPPRESS, "ambiguous-marker", conversational[0][0], historical=historical)
        if backed:  # the evidence is there, but only in sources a marker may not stand on
            return Decision(SUPPRESS, "source-ineligible", backed[0][0], historical=historical)
    return Decision(SUPPRESS, first_block or "weak-evidence", top, historical=historical)


def probability_share(top: Evidence, candidates: Sequence[Evidence]) -> float:
    """How likely a lexical candidate is the source asked for rather than one of its rivals: its
    share of the lexical candidates' learned-ranker probabilities (cwa/retrieve/ranker.py). Relative,
    so it means the same in an archive of ten documents or of a million. 1.0 for exact hits."""
    if top.mode != "lexical" or top.probability is None:
        return 1.0
    total = sum(c.probability for c in candidates if c.mode == "lexical" and c.probability is not None)
    return top.probability / total if total > 0 else 1.0


def auto_eligible(candidate: Evidence, age_limits: Mapping[str, int]) -> bool:
    """Durable and manual archives never appear automatically; others within their class's age."""
    if candidate.retention_class == "durable" or candidate.kind in NEVER_AUTOMATIC_KINDS:
        return False
    limit = age_limits.get(candidate.retention_class, 0)
    return limit == 0 or candidate.age_days <= limit


def _blocked(candidate: Evidence, policy: Policy) -> str | None:
    if candidate.visible:
        return "already-visible"
    if candidate.superseded:
        return "superseded-source"
    if not auto_eligible(candidate, policy.age_limits):
        return "source-ineligible"
    if candidate.recently_surfaced:
        return "recently-surfaced"
    return None


def _strong(candidate: Evidence) -> bool:
    if candidate.mode == "exact":
        return candidate.score >= STRONG_EXACT_SCORE
    if candidate.unique_word and candidate.coverage >= UNIQUE_WORD_COVERAGE:
        return True
    return (
        candidate.score >= STRONG_LEXICAL_SCORE
        and candidate.coverage >= MARKER_MIN_COVERAGE
        and candidate.max_idf >= MARKER_MIN_IDF
    )


def _support(candidate: Evidence) -> float:
    """How well a candidate answers the whole message, for the snippet margin. Lexical: its score.
    Exact: the anchor's score, weighed by how much of the rest of the message the evidence holds,
    so one anchor found in two sources is told apart by the words around it."""
    if candidate.mode == "exact":
        return round(candidate.score * (0.5 + 0.5 * candidate.coverage), 4)
    return candidate.score


def _marker_evidence(candidate: Evidence) -> bool:
    if candidate.mode == "exact":
        return bool(candidate.anchors) and candidate.score >= MARKER_MIN_EXACT_SCORE
    if candidate.coverage < MARKER_MIN_COVERAGE or candidate.max_idf < MARKER_MIN_IDF:
        return False
    if max(len(candidate.terms), candidate.occurrences) >= MARKER_MIN_TERMS:
        return True
    # The message's one content word ("could tablets help here?"), matched once: enough only
    # when that word is rare in the archive, so a single common word never marks a concept.
    content = [t for t, _ in candidate.terms if t not in FILLER_TERMS]
    return len(content) == 1 and candidate.coverage == 1.0 and candidate.max_idf >= SOLE_TERM_MIN_IDF


def _conversation_source(candidate: Evidence) -> bool:
    return candidate.retention_class == "conversation" and candidate.kind in MARKER_KINDS


def _safe_span(span: str) -> bool:
    """Rendered inside double quotes unchanged: no quote, backslash or control character."""
    return (
        0 < len(span) <= MAX_SPAN_CHARS
        and span.strip() == span
        and not any(c in '"\\' or ord(c) < 0x20 or c == "\x7f" for c in span)
    )


def _marker_spans(message: str, candidate: Evidence) -> tuple[str, ...]:
    """The message's own words for the shared concept, in message order, at most MAX_MARKER_SPANS."""
    if candidate.mode == "exact":
        found = [(message.find(a), a) for a in dict.fromkeys(candidate.anchors) if _safe_span(a)]
        chosen = [(at, a) for at, a in found if at >= 0][:MAX_MARKER_SPANS]
        return tuple(a for _, a in sorted(chosen))
    idf = dict(candidate.terms)
    specific = {t for t, value in idf.items() if value >= SPAN_MIN_IDF and t not in FILLER_TERMS}
    surfaces: dict[str, tuple[float, int]] = {}  # span → (idf, first offset)
    for token in tokens(message):
        if token.term in specific:
            span = message[token.start : token.end]
            if fold(span) in FILLER_WORDS:
                continue
            if _safe_span(span) and fold(span) not in {fold(s) for s in surfaces}:
                surfaces[span] = (idf[token.term], token.start)
    best = sorted(surfaces.items(), key=lambda item: (-item[1][0], item[1][1]))[:MAX_MARKER_SPANS]
    return tuple(span for span, _ in sorted(best, key=lambda item: item[1][1]))
