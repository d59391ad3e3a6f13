"""Explicit search: exact anchors, then structural relations, then BM25F over windows.

Tiers never cross: every exact result ranks above every structural one, which ranks above every
lexical one. Within a tier, a modest preference for the current session's lineage and for recent
sources reorders near-equals; it never outweighs relevance (at most +15%).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import apsw
import orjson

from cwa.config import Settings
from cwa.index.exact import Anchor, fold, query_anchors
from cwa.index.lexical import PROJECT_BLOCK_BITS, WEIGHTS
from cwa.index.semantic import pending
from cwa.index.structure import CUE_THRESHOLD
from cwa.index.terms import (
    CONTEXT_MARK,
    MAX_QUERY_TERMS,
    context_term,
    fts_phrase,
    fts_term_or_context,
    query_terms,
    terms,
    tokens,
)
from cwa.models import ModelUnavailable, reranker, reranker_dir
from cwa.retrieve import bm25, calibration, expansion, importance, neighbors, ranker, restatement
from cwa.retrieve.candidate import Candidate
from cwa.retrieve.context import (
    UNBOUNDED,
    Context,
    frequencies,
    make_context,
    scope_frequencies,
    scope_windows,
    specific_in_scope,
    window_span,
)
from cwa.retrieve.filler import FILLER_TERMS
from cwa.retrieve.fusion import fuse
from cwa.retrieve.intent import NO_ANSWER_WORDS, AnswerWords, Cues, answer_words, cues
from cwa.retrieve.locators import Locator, sign
from cwa.retrieve.near_duplicates import collapse
from cwa.retrieve.scope import resolve_scope
from cwa.retrieve.semantic import near_candidates, query_vector, semantic_candidates
from cwa.retrieve.summary import document_summary
from cwa.retrieve.windows import (
    Ranking,
    WindowRow,
    best_admissible,
    distinct_candidates,
    window_candidate,
    window_evidence,
)
from cwa.store import anchor_keys, anchor_lists
from cwa.store.connection import BOOKKEEPING_SKIPPED
from cwa.store.leases import DEFAULT_LEASE_SECONDS, grant_lease
from cwa.store.reads import message_at, message_by_ordinal, read_bytes
from cwa.store.secret import archive_secret
from cwa.store.sqlfiles import queries
from cwa.timestamps import age_days_ms
from cwa.tokens import estimate_tokens, fit_around
from cwa.vocabulary import RELATIONS

LEXICAL_POOL = 40  # windows fetched by BM25 before per-document dedup (at least WINDOWS_PER_RESULT × limit)
WINDOWS_PER_RESULT = 8  # a document often matches in several windows: fetch this many per result wanted
# A question whose answer states something it does not say (a change for one about the latest
# state, a fix for one about how a problem was solved, the user's own preference or rule for one
# about what the user said they like: intent.answer_words) also fetches its subject's windows that
# hold such words (a preference's in the user's text); for a latest-state question the ranker's
# `timeFit` then weighs their place in time. Only the best few: each more is one more of the
# subject's lures for the ranker to sort and one more candidate to read (`cwa eval long` recalled
# as well with 5 as with 10, at less cost: docs/evaluation.md).
ANSWER_POOL = 5  # documents a question's answer statements add to the pool
RANKER_POOL = 20  # candidates of each mode the learned ranker orders (at least `limit`)
# A scope of at least LONG_HISTORY_WINDOWS windows is a long history (LoCoMo's conversations hold
# 369 to 689). There a BM25F ranking with context phrases fetches OWN_TEXT_FETCH times the windows
# wanted and keeps the best by own text or by BM25F (_own_or_context); and a question that writes
# a name (intent.names: "What did Melanie paint?", "How is Redis set up?") also fetches the windows
# holding the name beside its other words: windows sharing many of a question's everyday words
# fill the BM25F pool of a long history, and those about the one it names sink below them
# (docs/evaluation.md, "The name a question writes"; in a short history it gained nothing).
LONG_HISTORY_WINDOWS = 2_000
NAMED_POOL = 5  # documents the windows holding a name the query writes add to the pool
OWN_TEXT_FETCH = 2
POSTINGS_BUDGET = 5_000  # windows: rarest terms are OR-ed until their postings add up to this
# An everyday word (FILLER_TERMS) fetches windows only where it is at least this specific (preflight's
# marker gate): "how", "many", "again" recur in window after window of a long history, and their
# postings filled the pool with windows sharing only a question's phrasing.
FILLER_FETCH_SPECIFICITY = 0.6
# An expression expected to match more windows than this is scored newest windows first (_bm25f).
SLICE_MATCHES = 2 * POSTINGS_BUDGET
SLICE_GROWTH = 4
RELATION_POOL = 200  # newest cue messages considered
RELATION_EXTRA_MATCHES = 5  # with a query: older matches examined for ambiguity
RELATION_MIN_COVERAGE = 0.5  # with a query: the share of its terms a latest-X message must hold
AMBIGUITY_MARGIN = 0.05  # an older match this much better than the latest makes a relation ambiguous
SNIPPET_MIN_TOKENS = 16
SNIPPET_MAX_TOKENS = 80
SNIPPET_REACH_CHARS_PER_TOKEN = 8  # no token covers more characters: the stretch a snippet is cut from
EVIDENCE_BYTES = 8 * 1024  # of an exact hit's message, each side of the anchor: ≥ the largest hint budget
LINEAGE_BOOST = 0.10
RECENCY_BOOST = 0.05
RECENCY_DAYS = 30.0


@dataclass
class Stages:
    """What a search found, stage by stage: the exact tier (anchor hits, or a relation's matches),
    shown first, then the ranked tier (BM25F, fused with semantic and expansion candidates, then
    ordered), which is searched only while the exact tier leaves room."""

    exact: list[Candidate]
    ranked: list[Candidate] = field(default_factory=list)

    def tiers(self) -> list[list[Candidate]]:
        return [self.exact, self.ranked]

    def taken(self) -> set[int]:
        """The documents the exact tier holds (the ranked tier leaves them out)."""
        return {c.document_row for c in self.exact}

    def weak(self) -> bool:
        """No exact anchor matched and the best ranked evidence is weak (or there is none)."""
        top = self.ranked[0] if self.ranked else None
        return not self.exact and (top is None or top.score < RESCUE_SCORE or top.coverage < RESCUE_COVERAGE)


class Embeddings(NamedTuple):
    """The semantic stage: its report (None when the policy is `never`), the candidates found by
    meaning and the query's vector (None when the embeddings were not asked)."""

    report: dict[str, Any] | None
    candidates: list[Candidate] | None = None
    vector: Any = None


def find_candidates(
    ctx: Context,
    query: str,
    limit: int,
    ignored_terms: frozenset[str] = frozenset(),
    matchable: Callable[[str, int, int], bool] | None = None,
    pool: int | None = None,
    context: bool = True,
    answers: AnswerWords = NO_ANSWER_WORDS,
    names: tuple[str, ...] = (),
) -> tuple[list[Anchor], list[str], Stages]:
    """The query's anchors and terms, and the exact tier then the lexical tier (the lexical one only
    while the exact tier has room; `pool` lexical candidates, default `limit`). `ignored_terms`
    never count as lexical query terms; `matchable(term, window frequency, windows)`, when given, picks the
    terms a window must hold one of to be fetched at all (the others still count in each window's
    matched terms and coverage; without it, every term but everyday words, FILLER_TERMS, common in
    the scope, unless the query has no other); without `context`, a window is fetched only for its
    own terms; with `answers` (intent.answer_words), also the windows that hold the query's subject
    and one of those words; with `names` (intent.names), also those holding one of the names and
    another of the query's terms."""
    anchors = query_anchors(query)
    stages = Stages(_exact_search(ctx, anchors, limit))
    qterms = [t for t in _select_terms(ctx, query) if t not in ignored_terms]
    if len(stages.exact) < limit:
        stages.ranked = _lexical_search(ctx, qterms, pool or limit, stages.taken(), matchable, context, answers, names)
    return anchors, qterms, stages


def search(conn: apsw.Connection, request: dict[str, Any], settings: Settings, now: str) -> dict[str, Any]:
    query, relation = request.get("query"), request.get("relation")
    scope = resolve_scope(
        conn,
        request.get("scope", "project"),
        request.get("project"),
        request.get("sessionId"),
        settings["maxReadScope"],
    )
    limit = request.get("limit") or settings["searchResults"]
    ctx = make_context(conn, scope, request.get("excludeVisibleSourceKeys") or [], now, request.get("sessionId"))

    stages = Stages([])
    semantic: dict[str, Any] | None = None
    expanded: list[str] = []
    reranked = False
    explained: ranker.Pool | None = None
    resolution = None
    qterms: list[str] = []
    anchors: list[Anchor] = []
    if scope.empty and relation:
        resolution = {"relation": relation, "status": "not-found"}
    if not scope.empty:
        if relation:
            found, status = _relation_search(ctx, RELATIONS[relation], query, limit)
            stages = Stages(found)
            resolution = {"relation": relation, "status": status}
        elif request.get("ranker", settings["ranker"]) == "learned":
            wording = cues(query or "")
            anchors, qterms, stages = find_candidates(
                ctx,
                query,
                limit,
                pool=max(limit, RANKER_POOL),
                answers=answer_words(query or "", wording.direction),
                names=wording.names,
            )
            semantic, explained = _learned_tier(ctx, request, settings, query, qterms, stages, limit, wording)
            reranked = _rerank(settings, request.get("rerank", True), query, stages)
        else:
            anchors, qterms, stages = find_candidates(ctx, query, limit)
            expanded = _expand(ctx, request, qterms, stages, limit)
            embeddings = _ask_embeddings(ctx, request, settings, query, qterms, stages, limit, limit)
            semantic = embeddings.report
            if embeddings.candidates is not None:
                stages.ranked = fuse(stages.ranked, embeddings.candidates)
            if stages.ranked:
                stages.ranked = collapse(_order_tier(ctx, request, settings, stages, qterms, limit))
                reranked = _rerank(settings, request.get("rerank", True), query, stages)
    results = _assemble(ctx, stages.tiers(), limit)
    budget = request.get("hintBudgetTokens", settings["hintBudgetTokens"])
    response = _present(ctx, results, budget, request.get("leaseSeconds", DEFAULT_LEASE_SECONDS))
    if resolution:
        for result in response["results"]:
            result["resolution"] = resolution["status"]
    response.update(
        query=query,
        queryTerms=qterms,
        anchors=[{"type": a.type, "text": a.text} for a in anchors],
        scope=scope.effective,
        requestedScope=scope.requested,
        resolution=resolution,
        semantic=semantic,
        expandedTerms=expanded,
        reranked=reranked,
    )
    if request.get("explain"):
        response["ranking"] = _explain(ctx, explained, request.get("ranker", settings["ranker"]))
    return response


def _learned_tier(
    ctx: Context,
    request: dict[str, Any],
    settings: Settings,
    query: str,
    qterms: list[str],
    stages: Stages,
    limit: int,
    wording: Cues,
) -> tuple[dict[str, Any] | None, ranker.Pool | None]:
    """The ranked tier ordered by the learned ranker, with the semantic report: the embeddings
    are asked as the semantic policy says (`auto`: on weak evidence); `wording`, the query's
    cues (intent.cues)."""
    exact, lexical = stages.exact, stages.ranked
    report, semantic, vector = _ask_embeddings(
        ctx, request, settings, query, qterms, stages, limit, max(limit, RANKER_POOL)
    )
    if not lexical and not semantic:
        return report, None
    weights = ranker.load(settings["rankerPath"])
    pool = ranker.order(
        ctx,
        lexical,
        semantic,
        vector,
        qterms,
        {c.document_row for c in exact},
        weights,
        anchored=[c.document_row for c in exact],
        cues=wording,
    )
    stages.ranked = collapse(restatement.reorder(ctx.conn, importance.reorder(ctx.conn, pool.kept), pool, query))
    return report, pool


def _explain(ctx: Context, pool: ranker.Pool | None, name: str) -> dict[str, Any]:
    """The ranker's view of the lexical/semantic tier: every pool candidate's features and
    probability, in its order, and whether the tier kept it (`explain: true`)."""
    if pool is None:
        return {"ranker": name, "model": None, "features": list(ranker.FEATURES), "pool": []}
    kept = {c.document_row for c in pool.kept}
    summaries = {c.document_row: document_summary(ctx.conn, c.document_row) for c in pool.candidates}
    return {
        "ranker": name,
        "model": pool.model,
        "features": list(ranker.FEATURES),
        "pool": [
            {
                "documentId": summaries[c.document_row]["documentId"],
                "version": summaries[c.document_row]["version"],
                "messageKey": getattr(message_at(ctx.conn, c.document_row, c.start), "key", None),
                "modes": c.modes,
                "probability": round(float(p), 6),
                "kept": c.document_row in kept,
                "features": [round(float(x), 6) for x in f],
            }
            for c, f, p in zip(pool.candidates, pool.features, pool.probability)
        ],
    }


def _order_tier(
    ctx: Context,
    request: dict[str, Any],
    settings: Settings,
    stages: Stages,
    qterms: list[str],
    limit: int,
) -> list[Candidate]:
    """The ranked tier's final order before near copies collapse: fused keys (one mode alone
    keeps its order), × the importance prior, then conversation-neighbour credit."""
    tier = stages.ranked
    if not any(c.modes for c in tier):  # not fused yet: one mode's order, with fused keys
        tier = fuse(tier)
    tier = importance.reorder(ctx.conn, tier)
    share = request.get("neighborCredit", settings["neighborCredit"])
    return neighbors.reorder(ctx, tier, qterms, limit, stages.taken(), share)


RERANK_PASSAGE_TOKENS = 256


def _rerank(settings: Settings, wanted: bool, query: str, stages: Stages) -> bool:
    """Reorder the top of the ranked tier by a cross-encoder, when one is installed and
    `rerankerEnabled` (stable; `score` untouched). Any failure keeps the fused order."""
    if not wanted or not settings["rerankerEnabled"] or not stages.ranked:
        return False
    try:
        model = reranker(reranker_dir(settings["rerankerPath"]))
        top = stages.ranked[: settings["rerankerCandidates"]]
        passages = []
        for candidate in top:
            left, right = fit_around(candidate.text, RERANK_PASSAGE_TOKENS, candidate.center)
            passages.append(candidate.text[left:right])
        scores = model.score(query, passages)
    except ModelUnavailable:
        return False
    except Exception:  # a failing model degrades silently to the fused order
        return False
    order = sorted(range(len(top)), key=lambda i: -scores[i])  # stable: ties keep the fused order
    for candidate in top:
        candidate.reranked = True
    stages.ranked = [top[i] for i in order] + stages.ranked[len(top) :]
    return True


def _expand(ctx: Context, request: dict[str, Any], qterms: list[str], stages: Stages, limit: int) -> list[str]:
    """Bo1 expansion on weak evidence: the expanded query's windows are fused into the ranked
    tier; their scores and coverage stay those of the original query terms."""
    if request.get("expansion") is False or not stages.ranked or not stages.weak():
        return []
    feedback = [c.text for c in stages.ranked[: expansion.FEEDBACK_WINDOWS]]
    counts = expansion.candidate_terms(feedback, qterms)
    df, total = frequencies(ctx, sorted(counts))
    added = expansion.bo1(counts, df, total)
    if not added:
        return []
    wider = _lexical_search(ctx, qterms + added, limit, set())
    for candidate in wider:
        original = [t for t in candidate.matched if t in qterms]
        candidate.matched = original
        candidate.score = calibration.lexical_score(qterms, original)
        candidate.coverage = round(len(original) / len(qterms), 4) if qterms else 0.0
    stages.ranked = fuse(stages.ranked, wider)
    return added


# --- semantic rescue and fusion ------------------------------------------------------------------

RESCUE_SCORE = 0.55  # below this top lexical score (or coverage 0.5), `auto` asks the embeddings too
RESCUE_COVERAGE = 0.5


def _ask_embeddings(
    ctx: Context,
    request: dict[str, Any],
    settings: Settings,
    query: str,
    qterms: list[str],
    stages: Stages,
    limit: int,
    size: int,
) -> Embeddings:
    """The semantic report, and `size` semantic candidates with the query's embedding when the
    policy asks for them (`auto`: only when no exact anchor matched and the lexical evidence is
    weak) and the exact tier leaves room; the report is None when the policy is `never`."""
    policy = request.get("semanticPolicy", "auto") if settings["semanticRetrieval"] else "never"
    if policy == "never":
        return Embeddings(None)
    report: dict[str, Any] = {"policy": policy, "used": False, "pendingWindows": None}
    if not (policy == "always" or stages.weak()) or len(stages.exact) >= limit:
        return Embeddings(report)
    report["pendingWindows"] = pending(ctx.conn)  # counted only when the embeddings are asked
    embedded = query_vector(ctx, query, near_candidates(stages.ranked))
    if embedded is None:
        report["unavailable"] = True
        return Embeddings(report)
    report["used"] = True
    if request.get("explain"):
        report["embeddedQuery"] = embedded.text
    candidates = semantic_candidates(ctx, embedded.vector, qterms, size, stages.taken())
    return Embeddings(report, candidates, embedded.vector)


# --- exact -------------------------------------------------------------------------------------


class AnchorHit(NamedTuple):
    """A document holding a query anchor (a row of `exact_anchor_hits`, or a verified phrase)."""

    document_row: int
    text: str
    start: int
    end: int


def _exact_search(ctx: Context, anchors: list[Anchor], limit: int) -> list[Candidate]:
    """Case-sensitive lookup of each query anchor; case-folded only when that misses."""
    sql = queries("search")
    best: dict[int, Candidate] = {}
    anchors_found: dict[int, set[str]] = {}
    docs_total = 0  # counted only when some anchor hits
    for anchor in anchors:
        hits, folded = [], False
        for folded in (False, True):
            key = fold(anchor.text) if folded else anchor.text
            hits = [
                AnchorHit(row, text, *found)
                for row, text, packed, text_id in ctx.conn.execute(
                    sql["exact_anchor_hits"],
                    {
                        "anchor": key,
                        "key": anchor_keys.key(key),
                        "folded": int(folded),
                        "visible": ctx.visible,
                        **ctx.filters(),
                    },
                )
                if (found := anchor_lists.span(packed, text_id))  # a posting's list holds it
            ]
            if hits:
                break
        if not hits and anchor.type == "quoted":
            hits, folded = _phrase_hits(ctx, anchor.text)
        if not hits:
            continue
        if not docs_total:
            docs_total = max(1, ctx.conn.execute(sql["document_count"]).fetchone()[0])
        # the same for every hit of this anchor (a common one has up to 1,000)
        score = calibration.exact_score(anchor.specificity, folded)
        max_idf = calibration.normalized_idf(len({hit.document_row for hit in hits}), docs_total)
        match_type = f"exact-{anchor.type}"
        for hit in hits:
            row = hit.document_row
            anchors_found.setdefault(row, set()).add(anchor.text)
            if row in best and best[row].score >= score:
                continue
            best[row] = Candidate(
                mode="exact",
                document_row=row,
                match_type=match_type,
                score=score,
                raw=score,
                start=hit.start,
                end=hit.end,
                matched=[hit.text],
                max_idf=max_idf,
            )
    for row, candidate in best.items():
        found = anchors_found[row]
        candidate.coverage = round(len(found) / max(1, len(anchors)), 4)
        candidate.anchors = [a.text for a in anchors if a.text in found]
        candidate.raw = round(len(found) + candidate.score, 4)
    ranked = sorted(best.values(), key=lambda c: (-c.raw, c.document_row))
    for candidate in ranked[: limit + 1]:  # only what can be shown needs its text
        _attach_message_text(ctx, candidate)
    return ranked


def _phrase_hits(ctx: Context, phrase: str) -> tuple[list[AnchorHit], bool]:
    """A quoted phrase found verbatim in window text: FTS5 phrase query, then byte verification."""
    phrase_terms = terms(phrase)
    if not phrase_terms:
        return [], False
    match = fts_phrase(" ".join(phrase_terms))
    rows = ctx.conn.execute(queries("search")["phrase_windows"], {"match": match, **ctx.filters()}).fetchall()
    for folded in (False, True):
        hits = []
        needle = fold(phrase) if folded else phrase
        for _, row, _, start, end in rows:
            data, _ = read_bytes(ctx.conn, row, start, end)
            text = data.decode("utf-8")
            haystack = fold(text) if folded else text
            at = haystack.find(needle)
            if at < 0:
                continue
            # Folding can change lengths; the folded position is then approximate.
            begin = start + len(text[:at].encode("utf-8"))
            if _position_visible(ctx, row, begin):
                continue
            stop = min(end, begin + len(phrase.encode("utf-8")))
            hits.append(AnchorHit(row, phrase, begin, stop))
        if hits:
            return hits, folded
    return [], False


def _attach_message_text(ctx: Context, candidate: Candidate) -> None:
    """Evidence text for an exact hit: the message holding it, at most EVIDENCE_BYTES on each side
    of the anchor (a tool output of megabytes is not read, nor tokenized, for one snippet)."""
    message = message_at(ctx.conn, candidate.document_row, candidate.start)
    if message is None:
        return
    low = max(message.text_start, candidate.start - EVIDENCE_BYTES)
    high = min(message.end, candidate.end + EVIDENCE_BYTES)
    data, _ = read_bytes(ctx.conn, candidate.document_row, low, high)
    candidate.text = data.decode("utf-8", errors="ignore")  # a cut at either edge drops a partial character
    candidate.center = len(data[: max(0, candidate.start - low)].decode("utf-8", errors="ignore"))


def _position_visible(ctx: Context, document_row: int, position: int) -> bool:
    if not ctx.visible_keys:
        return False
    message = message_at(ctx.conn, document_row, position)
    return message is not None and message.key in ctx.visible_keys


# --- lexical -----------------------------------------------------------------------------------


def _select_terms(ctx: Context, query: str) -> list[str]:
    """The query's distinct terms; past MAX_QUERY_TERMS, the most specific and rarest."""
    distinct = query_terms(query)
    if len(distinct) <= MAX_QUERY_TERMS:
        return distinct
    df, _ = frequencies(ctx, distinct)
    ranked = sorted(distinct, key=lambda t: (-calibration.term_prior(t), df[t] == 0, df[t], t))
    keep = set(ranked[:MAX_QUERY_TERMS])
    return [t for t in distinct if t in keep]


def match_expressions(
    qterms: list[str], df: dict[str, int], total: int, context: bool = True
) -> list[tuple[str, float, tuple[str, ...]]]:
    """FTS5 queries to run in turn, least-common posting lists first, within a work budget.

    The rarest terms are OR-ed while their postings add up to at most POSTINGS_BUDGET; commoner
    terms stay out of the MATCH (they still count in each candidate's matched terms and coverage).
    When even the rarest term is over the budget, the terms must first all occur together (AND),
    and the OR of the rarest follows only if that finds too little. The OR also matches a term in
    a window's context field (a reply found by its question's words), unless not `context`.
    Each comes with the number of windows it is expected to match (terms taken as independent)
    and its phrases in FTS5's order (a term's context twin right after it).
    """
    present = sorted((t for t in qterms if df[t] > 0), key=lambda t: (df[t], t))
    if not present:
        return []
    chosen, spent = [], 0
    for term in present:
        if chosen and spent + df[term] > POSTINGS_BUDGET:
            break
        chosen.append(term)
        spent += df[term]
    broad = " OR ".join(fts_term_or_context(t) if context else fts_phrase(t) for t in chosen)
    phrases = tuple(p for t in chosen for p in ((t, context_term(t)) if context else (t,)))
    if df[present[0]] > POSTINGS_BUDGET and len(present) > 1:
        together = float(total)
        for term in present:
            together *= df[term] / max(total, 1)
        return [
            (" AND ".join(fts_phrase(t) for t in present), together, tuple(present)),
            (broad, float(spent), phrases),
        ]
    return [(broad, float(spent), phrases)]


def _lexical_search(
    ctx: Context,
    qterms: list[str],
    limit: int,
    taken: set[int],
    matchable: Callable[[str, int, int], bool] | None = None,
    context: bool = True,
    answers: AnswerWords = NO_ANSWER_WORDS,
    names: tuple[str, ...] = (),
) -> list[Candidate]:
    """BM25F candidates ordered with the modest lineage/recency preference, one per document and
    per identical content; with `answers`, then the query's windows that hold one of those words;
    with `names`, then those that hold one of the names and another query term."""
    if not qterms:
        return []
    df, total = frequencies(ctx, qterms)
    if matchable is None:  # an everyday word that is common here fetches only for a query of nothing else
        wanted = [
            t for t in qterms if t not in FILLER_TERMS or specific_in_scope(ctx, t, df[t], FILLER_FETCH_SPECIFICITY)
        ] or qterms
    else:
        wanted = [t for t in qterms if matchable(t, df[t], total)]
    rows: list[WindowRow] = []
    seen_windows: set[int] = set()
    postings, windows = _postings(ctx, wanted, df, total)
    expressions = match_expressions(wanted, postings, windows, context)
    for match, expected, phrases in expressions:
        ranking = _bm25f(ctx, match, expected, phrases, in_range=windows != total)
        for found in best_admissible(ctx, ranking, max(LEXICAL_POOL, WINDOWS_PER_RESULT * limit), limit, taken):
            if found.window_id not in seen_windows:
                seen_windows.add(found.window_id)
                rows.append(found)
        if len({r.document_row for r in rows} - taken) > limit:
            break
    preferred = {r.window_id: r.score * _preference(ctx, r) for r in rows}
    rows.sort(key=lambda r: (-preferred[r.window_id], r.document_row, r.ordinal))

    def candidate(window: WindowRow) -> Candidate:
        evidence = window_evidence(ctx.conn, window, qterms)
        idf = max((calibration.normalized_idf(df[t], total) for t in evidence.matched), default=0.0)
        return window_candidate(
            "lexical",
            "bm25",
            calibration.lexical_score(qterms, evidence.matched),
            window.score,
            window,
            evidence,
            max_idf=idf,
            order=preferred[window.window_id],
            bm25=window.score,
        )

    chosen = distinct_candidates(rows, taken, limit, candidate)
    extra: list[tuple[int, Callable[[set[int]], list[WindowRow]]]] = []  # (documents, their fetch)
    if answers:
        extra.append((ANSWER_POOL, lambda held: _answer_statements(ctx, expressions, held, windows != total, answers)))
    if names and NAMED_POOL and _long_history(ctx):
        counts = (postings, windows, windows != total)
        extra.append((NAMED_POOL, lambda held: _named_windows(ctx, wanted, counts, context, names, held)))
    for documents, fetch in extra:
        held = taken | {c.document_row for c in chosen}
        found = fetch(held)
        preferred.update((r.window_id, r.score * _preference(ctx, r)) for r in found)
        chosen += distinct_candidates(found, held, documents, candidate)[:documents]
    return chosen


@functools.cache
def answer_terms(words: tuple[str, ...]) -> tuple[str, ...]:
    """Answer words (intent.answer_words) as the index's terms, each once."""
    return tuple(query_terms(" ".join(words)))


def _answer_statements(
    ctx: Context,
    expressions: list[tuple[str, float, tuple[str, ...]]],
    taken: set[int],
    in_range: bool,
    answers: AnswerWords,
) -> list[WindowRow]:
    """The windows of the query's rarest terms (its broad expression, the last of `expressions`)
    that also hold one of the answer's words (`answers.user` in the user's own text), by BM25F
    over both."""
    if not expressions:
        return []
    _, _, phrases = expressions[-1]
    anywhere, user = answer_terms(answers.anywhere), answer_terms(answers.user)
    df, _ = frequencies(ctx, list(dict.fromkeys(anywhere + user)))
    anywhere, user = (tuple(t for t in words if df[t] > 0 and t not in phrases) for words in (anywhere, user))
    either = []
    if anywhere:
        either.append(" OR ".join(fts_phrase(t) for t in anywhere))
    if user:
        either.append("{user} : (" + " OR ".join(fts_phrase(t) for t in user) + ")")
    if not either:
        return []
    return _holding_also(ctx, expressions[-1], (" OR ".join(either), anywhere + user), in_range, taken, ANSWER_POOL)


def _holding_also(
    ctx: Context,
    subject: tuple[str, float, tuple[str, ...]],
    also: tuple[str, tuple[str, ...]],
    in_range: bool,
    taken: set[int],
    documents: int,
) -> list[WindowRow]:
    """The windows matching a subject expression (`match_expressions`' form) that also match
    `also` (an expression and its phrases), by BM25F over both: enough for `documents` not in
    `taken`."""
    match, expected, phrases = subject
    ranking = _bm25f(ctx, f"({match}) AND ({also[0]})", expected, phrases + also[1], in_range)
    return best_admissible(ctx, ranking, documents * WINDOWS_PER_RESULT, documents, taken)


def _named_windows(
    ctx: Context,
    wanted: list[str],
    counts: tuple[dict[str, int], int, bool],
    context: bool,
    names: tuple[str, ...],
    taken: set[int],
) -> list[WindowRow]:
    """The windows whose own text holds a name the query writes (`names`) and that match its
    other fetching terms (`wanted`: their rarest, as the broad expression takes them), by BM25F
    over both; `counts`, the terms' postings, the windows they are counted among and whether
    those are the scope's range (_postings). None when the query has no other term, or the scope
    no window of the name."""
    postings, windows, in_range = counts
    named = [t for t in query_terms(" ".join(names)) if t in wanted and postings[t] > 0]
    others = [t for t in wanted if t not in named]
    expressions = match_expressions(others, postings, windows, context) if named else []
    if not expressions:
        return []
    name = (" OR ".join(fts_phrase(t) for t in named), tuple(named))
    return _holding_also(ctx, expressions[-1], name, in_range, taken, NAMED_POOL)


def _long_history(ctx: Context) -> bool:
    """Whether the scope is a long history (LONG_HISTORY_WINDOWS windows or more)."""
    return scope_windows(ctx) >= LONG_HISTORY_WINDOWS


def _postings(ctx: Context, wanted: list[str], df: dict[str, int], total: int) -> tuple[dict[str, int], int]:
    """The postings each term costs FTS5, which only walks the scope's window range, and the
    windows they are counted among: the archive's counts while they fit the budget anyway (the
    range holds no more of any term), else the range's own (up to the budget: a term over it is
    over it)."""
    if sum(df[t] for t in wanted) <= POSTINGS_BUDGET or scope_windows(ctx) == total:
        return df, total
    return scope_frequencies(ctx, wanted, POSTINGS_BUDGET + 1)


def _bm25f(ctx: Context, match: str, expected: float, phrases: tuple[str, ...], in_range: bool = False) -> Ranking:
    """FTS5's own top k for an expression (its fastest path), as relevance: -bm25(), higher better.

    FTS5 scores every window an expression matches before it sorts, so an unselective one (only
    common terms: expected to match more than SLICE_MATCHES windows) is scored over the newest
    windows first: the newest id range expected to hold POSTINGS_BUDGET matches, grown until it
    holds k of them. The cost is then bounded by the budget, not by the archive's size; BM25
    keeps the whole index's statistics, and a selective expression is scored everywhere at once.
    Where counting the phrases' postings would cost more than the scoring itself, the same BM25F
    is computed with the counts search already holds (cwa/retrieve/bm25.py).
    A project's search is bounded to its windows' id range (`window_span`): FTS5 scores no other
    project's windows outside it. `expected` counts the matches in that range when `in_range`,
    else in the whole archive. Each project's windows take ids from a block of its own, so a
    search of every project slices the newest block only (the latest project's windows, newest
    first), then scores every window at once.
    With context phrases, in a long history, each window's relevance weighs its own text apart
    (`_own_or_context`).
    """
    sql = queries("search")
    first, last = window_span(ctx)
    bounded = (first, last) != UNBOUNDED
    _, total = frequencies(ctx, [])  # the archive's windows
    newest, floor = last, first  # a project's newest window is its range's top, its ids dense
    if not bounded and expected > SLICE_MATCHES:
        # Every project's: ids are dense only within a project's block (cwa/index/lexical.py), so
        # slices stay within the newest block, then take every window at once.
        newest = ctx.conn.execute(sql["newest_window"]).fetchone()[0]
        floor = max(first, newest >> PROJECT_BLOCK_BITS << PROJECT_BLOCK_BITS)
    if bounded and not in_range:  # matches taken as spread evenly over the windows: the range holds its share
        expected *= min(1.0, (last - first) / total) if total else 1.0
    span = 0  # a selective expression: the whole range at once
    if expected > SLICE_MATCHES:  # the newest windows expected to hold POSTINGS_BUDGET matches
        span = max(1, int((last - first if bounded else total) * POSTINGS_BUDGET / expected))
    statement, ranking = sql["lexical_top"], WEIGHTS  # each column's weight, by its name
    known = [ctx.frequencies[p] for p in phrases if p in ctx.frequencies]  # the context twins come later
    python = bm25.cheaper(sum(known), len(phrases), min(expected, POSTINGS_BUDGET) if span else expected)
    fetch = OWN_TEXT_FETCH if _long_history(ctx) and any(p.startswith(CONTEXT_MARK) for p in phrases) else 1
    if python:
        df, _ = frequencies(ctx, list(phrases))
        bm25.register(ctx.conn)
        hits = orjson.dumps([df[p] for p in phrases]).decode()
        statement, ranking = sql["lexical_top_known_idf"], {"hits": hits, "own": int(fetch > 1)}

    def rank(k: int) -> tuple[dict[int, float], bool]:
        nonlocal span
        while True:
            low = newest - span if span else first
            low = low if low >= floor else first  # past the newest block: the whole range
            params = {"match": match, **ranking, "k": k * fetch, "low": low, "high": newest}
            top = ctx.conn.execute(statement, params).fetchall()
            if len(top) >= k or low == first:
                exhausted = len(top) < k
                if fetch == 1:
                    return {row[0]: -row[1] for row in top}, exhausted
                if python:
                    own = bm25.own_scores(ctx.conn)
                    scored = [(w, -raw, -own[w]) for w, raw in top]
                else:
                    scored = [(w, -raw, -without) for w, raw, without in top]
                return _own_or_context(scored, k), exhausted
            span *= SLICE_GROWTH

    return rank


def _own_or_context(scored: list[tuple[int, float, float]], k: int) -> dict[int, float]:
    """The k best of (window, BM25F, BM25F without the context field) by the better of the two,
    each relative to the best of its own kind among them, on BM25F's scale.

    The context field finds a reply by the words of the message before it, which suits a short
    chat. In a long history on one subject every message's context holds the subject's words,
    and windows matched mostly there crowded out the window whose own text answers: scored on its
    own scale, the best own-text match ranks with the best match overall. The windows are those
    BM25F ranks best (OWN_TEXT_FETCH times k of them; a window's own score never exceeds its
    BM25F): in a scratch comparison, taking every window of both rankings found the same
    (docs/evaluation.md)."""
    best = max((s for _, s, _ in scored), default=0.0)
    best_own = max((o for _, _, o in scored), default=0.0)
    if best <= 0.0 or best_own <= 0.0:
        return {w: s for w, s, _ in scored[:k]}
    scale = best / best_own  # an own-text score on BM25F's scale
    blended = sorted((-(s if s >= o * scale else o * scale), w) for w, s, o in scored)
    return {w: -negative for negative, w in blended[:k]}


def _preference(ctx: Context, window: WindowRow) -> float:
    """The modest lineage/recency multiplier a window's relevance gets (at most +15%)."""
    boost = 1.0 + (LINEAGE_BOOST if window.session_row in ctx.lineage else 0.0)
    return boost + RECENCY_BOOST / (1.0 + max(0.0, age_days_ms(window.created_ms, ctx.now_ms)) / RECENCY_DAYS)


# --- structural --------------------------------------------------------------------------------


class CueRow(NamedTuple):
    """A message carrying a structural cue (a row of `relation_candidates`)."""

    document_row: int
    ordinal: int
    score: float
    key: str
    role: str
    start: int
    text_start: int
    end: int


def _relation_search(ctx: Context, cue: str, query: str | None, limit: int) -> tuple[list[Candidate], str]:
    """Messages with the cue, newest first. Without a query the newest ones are the answer; with
    one, each message is judged on its own text, scanning until a few more than `limit` match."""
    name = "relation_candidates" if ctx.scope.project_row is not None else "relation_candidates_all"
    params = {"cue": cue, "threshold": CUE_THRESHOLD, "pool": RELATION_POOL, "visible": ctx.visible}
    if ctx.scope.project_row is not None:
        params.update(ctx.scope.params())
    rows = (CueRow(*row) for row in ctx.conn.execute(queries("search")[name], params))
    qterms = query_terms(query)[:MAX_QUERY_TERMS] if query else []
    df, total = frequencies(ctx, qterms) if qterms else ({}, 0)
    found: list[Candidate] = []
    for position, message in enumerate(rows):
        data, _ = read_bytes(ctx.conn, message.document_row, message.text_start, message.end)
        text = data.decode("utf-8")
        matched: list[str] = []
        coverage = None
        center = 0
        if qterms:
            # BM25 evidence on this one message: sibling text cannot satisfy the query.
            message_tokens = list(tokens(text))
            present = {t.term for t in message_tokens}
            matched = [t for t in qterms if t in present]
            coverage = len(matched) / len(qterms)
            if coverage < RELATION_MIN_COVERAGE:
                continue
            center = next((t.start for t in message_tokens if t.term in matched), 0)
        candidate = Candidate(
            mode="structural",
            document_row=message.document_row,
            match_type=f"latest-{cue}",
            score=calibration.structural_score(message.score, coverage),
            raw=round(message.score, 4),
            start=message.start,
            end=message.end,
            message=message.ordinal,
            matched=matched,
            coverage=round(coverage, 4) if coverage is not None else 1.0,
            max_idf=max((calibration.normalized_idf(df[t], total) for t in matched), default=0.0),
            text=text,
            center=center,
            order=-position,  # newest first: "latest"
        )
        found.append(candidate)
        if len(found) > limit + (RELATION_EXTRA_MATCHES if qterms else 0):
            break
    if not found:
        return [], "not-found"
    # With a query, ambiguous when an older candidate is clearly better evidence than the latest.
    latest = found[0]
    if qterms and any(c.score > latest.score + AMBIGUITY_MARGIN for c in found[1:]):
        return found, "ambiguous"
    return found, "resolved"


# --- assembly ----------------------------------------------------------------------------------


def _assemble(ctx: Context, tiers: list[list[Candidate]], limit: int) -> list[tuple[Candidate, dict, float]]:
    """Tiers in order, one result per document (and per identical content), margins per mode."""
    chosen: list[tuple[Candidate, dict, float]] = []
    seen_rows: set[int] = set()
    seen_content: set[str] = set()
    for tier in tiers:
        kept = []
        for candidate in tier:
            if len(chosen) + len(kept) > limit:
                break  # one more than shown: its score gives the last margin
            if candidate.document_row in seen_rows:
                continue
            summary = document_summary(ctx.conn, candidate.document_row)
            if summary["textDigest"] in seen_content or (candidate.alias and candidate.alias in seen_content):
                continue
            seen_rows.add(candidate.document_row)
            seen_content.update(a for a in (candidate.alias, summary["textDigest"]) if a)
            kept.append((candidate, summary))
        for index, (candidate, summary) in enumerate(kept):
            following = kept[index + 1][0].score if index + 1 < len(kept) else 0.0
            chosen.append((candidate, summary, round(candidate.score - following, 4)))
    return chosen[:limit]


def snippet(candidate: Candidate, ctx: Context, budget: int) -> str:
    """Text around the match within `budget` tokens (a hard bound, ellipses included)."""
    text = candidate.text
    if not text:
        data, _ = read_bytes(ctx.conn, candidate.document_row, candidate.start, candidate.end)
        text = data.decode("utf-8")
    text = text.strip()
    if len(text) <= budget * SNIPPET_REACH_CHARS_PER_TOKEN and estimate_tokens(text) <= budget:
        return text
    ellipsis = estimate_tokens("…")
    # A token never covers more than a few characters: look only at a stretch around the match
    # wide enough for the budget, not at the whole window (fit_around prices every piece it sees).
    reach = SNIPPET_REACH_CHARS_PER_TOKEN * budget
    offset = max(0, candidate.center - reach)
    stretch = text[offset : candidate.center + 2 * reach]
    left, right = fit_around(stretch, max(0, budget - 2 * ellipsis), candidate.center - offset)
    left, right = left + offset, right + offset
    return ("…" if left > 0 else "") + text[left:right] + ("…" if right < len(text) else "")


def _present(ctx: Context, chosen: list[tuple[Candidate, dict, float]], budget: int, lease_seconds: int) -> dict:
    conn = ctx.conn
    sql = queries("search")
    lease_id, expires = None, None
    if chosen and lease_seconds > 0:
        try:
            lease_id, expires = grant_lease(
                conn, chosen[0][1]["projectRow"], [s["row"] for _, s, _ in chosen], ctx.now, lease_seconds
            )
        except BOOKKEEPING_SKIPPED:
            pass  # results without protection beat no results: their locators carry no lease
    secret = archive_secret(conn)
    share = (
        max(SNIPPET_MIN_TOKENS, min(SNIPPET_MAX_TOKENS, budget // max(1, len(chosen))))
        if budget
        else SNIPPET_MIN_TOKENS
    )
    results = []
    for candidate, summary, margin in chosen:
        message = (
            message_by_ordinal(conn, candidate.document_row, candidate.message)
            if candidate.message is not None
            else message_at(conn, candidate.document_row, candidate.start)
        )
        locator = Locator(
            documentId=summary["documentId"],
            version=summary["version"],
            unit="message" if candidate.message is not None else "window" if candidate.window is not None else "anchor",
            window=candidate.window,
            start=candidate.start,
            end=candidate.end,
            message=candidate.message,
            generation=summary["generation"],
            lease=lease_id,
            project=summary["project"],
            session=summary["sessionId"],
            scope=ctx.scope.effective,
        )
        results.append(
            {
                "documentId": summary["documentId"],
                "version": summary["version"],
                "kind": summary["kind"],
                "score": candidate.score,
                "rawScore": float(f"{candidate.raw:.6g}"),
                "matchType": candidate.match_type,
                "margin": margin,
                "band": calibration.band(candidate.score),
                "snippet": snippet(candidate, ctx, share),
                "matchedTerms": candidate.matched,
                "termCoverage": candidate.coverage,
                "maxNormalizedIdf": candidate.max_idf,
                "modes": candidate.modes or [candidate.mode],
                "reranked": candidate.reranked,
                "historical": True,
                "superseded": summary["state"] == "superseded",
                "createdAt": summary["createdAt"],
                "range": {"start": candidate.start, "end": candidate.end},
                "locator": sign(locator, secret),
                "source": {
                    "sessionId": summary["sessionId"],
                    "project": summary["project"],
                    "messageKey": message.key if message else None,
                },
            }
        )
    return {
        "results": results,
        "lease": {"id": lease_id, "expiresAt": expires} if lease_id else None,
        "generation": conn.execute(sql["latest_generation"]).fetchone()[0],
    }
