"""The learned ranker: the lexical/semantic tier ordered by a small logistic model.

The pool is the BM25F candidates, the embedding candidates (when asked) and the session
neighbours of the best of both. Each candidate gets FEATURES, computed from what search has
already read (and the last window of the document before each candidate): its BM25F relevance
(over its own fields and its context field) and rank, how much of the query its own text holds,
its cosine similarity to the query and rank, the same evidence of the documents just before and
after it in its session, its session's share of the pool's evidence, whether it or the document
just before it ends asking a question (a reply follows a question), how much of the query it and
the document before it hold together, and, only when the query asks for the latest or the earliest
statement, its place in time among the pool's candidates. Small boosted trees (logistic loss)
turn them into the probability that the candidate is what the query asks for; the tier is
ordered by it (ties keep the pool order), and a neighbour found by neither mode is kept only at
NEIGHBOR_MIN_PROBABILITY or more. The presented `score` stays the candidate's own calibrated
evidence (cwa/retrieve/calibration.py) and exact and structural hits still rank above the whole
tier.

The trees ship as package data (ranker.json: one model for the lexical pool, one for the hybrid
pool) and are evaluated as one generated Python function per model (no numpy: a lexical search
never imports it); `eval/retrieval/train_ranker.py` trains them again. Evaluation is out of
fold: a model is only ever scored on conversations it was not trained on (docs/evaluation.md).
"""

from __future__ import annotations

import contextlib
import importlib.util
import marshal
import math
import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from pathlib import Path
from types import CodeType
from typing import TYPE_CHECKING

import orjson
from blake3 import blake3

from cwa.errors import InvalidRequest, StorageUnavailable
from cwa.file_writes import write_atomically
from cwa.index.structure import asks_question
from cwa.index.terms import terms
from cwa.models import cache_folder
from cwa.retrieve import calibration
from cwa.retrieve.candidate import Candidate
from cwa.retrieve.context import Context, frequencies
from cwa.retrieve.intent import NO_CUES, Cues
from cwa.retrieve.neighbors import admissible_neighbors, neighbor_candidates
from cwa.retrieve.windows import terms_of_windows
from cwa.store.sqlfiles import queries
from cwa.store.vector_format import INT8_BYTES

if TYPE_CHECKING:
    import numpy as np

FEATURES = (
    "bm25",  # BM25F relevance / the pool's best (0 when BM25F did not find it)
    "lexicalRank",  # 1 / (1 + rank) among the BM25F candidates, 0 when absent
    "coverage",  # share of the query terms its own text holds
    "evidence",  # its calibrated lexical score
    "maxIdf",  # normalized IDF of its rarest matched term
    "contextOnly",  # found by BM25F through its context field alone
    "cosine",  # cosine similarity of its window to the query (0 without embeddings)
    "cosineGap",  # cosine − the pool's best cosine
    "semanticRank",  # 1 / (1 + rank) among the embedding candidates, 0 when absent
    "idfCoverage",  # IDF-weighted share of the query terms its own text holds
    "bm25Strength",  # BM25F relevance / the query terms' summed IDF: evidence across queries
    "queryTerms",  # log(1 + the query's terms)
    "length",  # log(1 + its text's characters / 100)
    "bm25Cosine",  # bm25 × cosine: both modes agree
    "beforeBm25",  # bm25 of the document just before it in its session
    "afterBm25",  # bm25 of the document just after it
    "beforeCosine",  # cosine of the window of the document just before it nearest to it
    "afterCosine",  # cosine of the window of the document just after it nearest to it
    "sessionShare",  # its session's share of the pool's bm25 + cosine mass
    "toolOutput",  # a tool-result document
    "timeFit",  # −1 unless the query asks for the latest (earliest) statement: then the share of
    # the pool's other candidates created before (after) it. Never a preference for new by itself.
    "speakerFit",  # 1 when the query names the person its text opens with ("Name: …"), −1 when the
    # query names another such speaker of the pool but not its own, else 0 (no speaker named)
    "timeMention",  # 1 when the query asks when and its text mentions a time (a date, a time of day, a weekday, a
    # month, "yesterday", "last week", "… ago"), −1 when it asks and the text mentions none, else 0
    "asksQuestion",  # 1 when its text's last paragraph asks a question (`ends_asking`): seldom the answer
    "followsQuestion",  # 1 when the document just before it in its session ends asking one: a reply
    "exchangeCoverage",  # IDF-weighted share of the query terms its own text or the document just before
    # it holds: a reply found with the question it answers
)
MODELS = ("lexical", "hybrid")
NEIGHBOR_SOURCES = 10  # the best candidates of the pool whose neighbours join it
NEIGHBOR_MIN_PROBABILITY = 0.03  # a neighbour found by neither mode needs this much to be kept


NO_SPLIT = 1e308  # a node's threshold when it did not split: every row goes left


@dataclass(frozen=True)
class Model:
    """Boosted regression trees of one depth, complete (a node that did not split sends every
    row left), on the log-odds scale: `base` + the sum of each tree's leaf."""

    base: float
    feature: tuple[tuple[int, ...], ...]  # per tree, the feature index of each inner node, breadth first
    threshold: tuple[tuple[float, ...], ...]  # a row goes right when its feature ≥ this
    leaf: tuple[tuple[float, ...], ...]  # per tree, its 2**depth leaf values

    def probability(self, rows: Sequence[Sequence[float]]) -> list[float]:
        log_odds = self._log_odds
        return [1.0 / (1.0 + math.exp(min(-log_odds(row), 700.0))) for row in rows]

    @cached_property
    def _log_odds(self) -> Callable[[Sequence[float]], float]:
        """The trees as one function of nested comparisons, built once per process (its code object
        kept per user: `_compiled`); warm search is as fast as with numpy's arrays
        (`eval/perf/search_files.py`, docs/performance.md)."""
        depth = len(self.leaf[0]).bit_length() - 1
        lines = ["def log_odds(x):", f"    s = {self.base!r}"]
        for tree in zip(self.feature, self.threshold, self.leaf):
            lines += _branch(*tree, node=0, level=0, depth=depth, indent=1)
        namespace: dict = {}
        exec(_compiled("\n".join([*lines, "    return s"])), namespace)
        return namespace["log_odds"]


def _compiled(source: str) -> CodeType:
    """The trees' code object. Compiling it costs a one-shot search more than ranking does, so it
    is kept per user beside the embedding graphs, as Python keeps a module's bytecode: named by the
    digest of the source and the interpreter's bytecode version, written whole or not at all. An
    unreadable or unwritable cache only costs the compile."""
    key = blake3(importlib.util.MAGIC_NUMBER + source.encode()).hexdigest()[:32]
    path = cache_folder() / f"ranker-{key}.code"
    with contextlib.suppress(OSError, ValueError, EOFError, TypeError):
        code = marshal.loads(path.read_bytes())
        if isinstance(code, CodeType) and code.co_filename == _TREES:
            return code
    code = compile(source, _TREES, "exec")
    with contextlib.suppress(StorageUnavailable):
        write_atomically(path, marshal.dumps(code))
    return code


_TREES = "<ranker trees>"


def _branch(
    feature: tuple[int, ...],
    threshold: tuple[float, ...],
    leaf: tuple[float, ...],
    node: int,
    level: int,
    depth: int,
    indent: int,
) -> list[str]:
    """The source lines of one tree from `node` down (children of node n: 2n + 1 left, 2n + 2 right)."""
    pad = "    " * indent
    if level == depth:
        return [f"{pad}s += {leaf[node - len(feature)]!r}"]
    left = (feature, threshold, leaf, 2 * node + 1, level + 1, depth)
    if threshold[node] >= NO_SPLIT:
        return _branch(*left, indent=indent)
    right = (feature, threshold, leaf, 2 * node + 2, level + 1, depth)
    return [
        f"{pad}if x[{feature[node]}] >= {threshold[node]!r}:",
        *_branch(*right, indent=indent + 1),
        f"{pad}else:",
        *_branch(*left, indent=indent + 1),
    ]


@dataclass(frozen=True)
class Weights:
    models: dict[str, Model]
    fingerprint: str
    source: str


@lru_cache(maxsize=8)
def load(path: str = "") -> Weights:
    """The shipped weights, or those of a file (the `rankerPath` setting); `invalid-request` when
    the file is not a ranker of these FEATURES."""
    try:
        # package data beside this module, as sql/ is (importlib.resources would cost a cold start 5 ms)
        data = Path(path or Path(__file__).with_name("ranker.json")).read_bytes()
        found = orjson.loads(data)
        if tuple(found["features"]) != FEATURES:
            raise ValueError("trained on other features")
        models = {name: _model(found["models"][name]) for name in MODELS}
    except (OSError, ValueError, KeyError, TypeError, IndexError, orjson.JSONDecodeError) as exc:
        raise InvalidRequest(
            f"ranker weights {path or 'ranker.json'} are unusable: {exc}", field="rankerPath", reason="invalid-ranker"
        ) from exc
    return Weights(models, str(found.get("fingerprint", "")), path or "package")


def _model(found: dict) -> Model:
    feature = tuple(tuple(int(f) for f in tree) for tree in found["feature"])
    threshold = tuple(tuple(float(t) for t in tree) for tree in found["threshold"])
    leaf = tuple(tuple(float(v) for v in tree) for tree in found["leaf"])
    inner = len(feature[0]) if feature else 0
    if (
        not feature
        or (inner + 1) & inner  # a complete tree has 2**depth − 1 inner nodes
        or len(threshold) != len(feature)
        or len(leaf) != len(feature)
        or any(len(f) != inner for f in feature)
        or any(len(t) != inner for t in threshold)
        or any(len(v) != inner + 1 for v in leaf)
    ):
        raise ValueError("trees of inconsistent shapes")
    if any(not 0 <= f < len(FEATURES) for tree in feature for f in tree):
        raise ValueError("a split on an unknown feature")
    return Model(float(found["base"]), feature, threshold, leaf)


@dataclass
class Pool:
    """Every candidate of one query by the model's probability, its features, and those the
    tier keeps."""

    candidates: list[Candidate]
    features: list[tuple[float, ...]]
    probability: list[float]
    model: str
    kept: list[Candidate]
    before: dict[int, int | None]  # each document it read neighbours of: the one just before it in its session


def order(
    ctx: Context,
    lexical: list[Candidate],
    semantic: list[Candidate] | None,
    vector: np.ndarray | None,
    qterms: list[str],
    taken: set[int],
    weights: Weights,
    neighbors: bool = True,
    anchored: list[int] = (),
    cues: Cues = NO_CUES,
) -> Pool:
    """The pool ordered by the model's probability, best first; each candidate's `order` is it.
    `anchored`: the exact tier's documents, above the pool, whose neighbours count as those of
    the best candidates. Without `neighbors`, only the given candidates are scored (preflight:
    cheap, own evidence). `cues`: what its wording says (cwa/retrieve/intent.py)."""
    candidates = _merge(lexical, semantic or [])
    rank_lexical = {c.document_row: i for i, c in enumerate(lexical)}
    rank_semantic = {c.document_row: i for i, c in enumerate(semantic or [])}
    rows = [*anchored, *(c.document_row for c in candidates)]
    found = ctx.conn.execute(queries("ranking")["session_neighbors"], {"rows": orjson.dumps(rows).decode()}).fetchall()
    around = {
        hit: (before, before_window, after, after_window) for hit, before, before_window, after, after_window in found
    }
    head = sorted(
        candidates,
        key=lambda c: min(rank_lexical.get(c.document_row, math.inf), rank_semantic.get(c.document_row, math.inf)),
    )[:NEIGHBOR_SOURCES]
    if neighbors:
        sources = [*anchored, *(c.document_row for c in head)]
        candidates += _neighbors(ctx, sources, around, {c.document_row for c in candidates} | taken, qterms)
    windows = {c.window_id for c in candidates if c.window_id is not None}
    windows |= {w for row in around.values() for w in (row[1], row[3]) if w is not None}
    cosine = _cosines(ctx, vector, windows) if vector is not None else {}
    df, total = frequencies(ctx, qterms)
    idf = {t: calibration.idf(df[t], total) for t in qterms}
    fit = _time_fit(ctx, candidates, cues.direction)
    speaker = _speaker_fit(candidates, cues.names)
    when = _time_mention(candidates) if cues.asks_when else {}
    earlier = _before(ctx, candidates, around, qterms)
    features = _features(
        candidates, around, rank_lexical, rank_semantic, cosine, idf, set(anchored), fit, speaker, when, earlier
    )
    model = "hybrid" if semantic is not None else "lexical"
    probability = weights.models[model].probability(features)
    ranked = sorted(range(len(candidates)), key=lambda i: -probability[i])  # stable: pool order on ties
    ordered = [replace(candidates[i], order=float(probability[i])) for i in ranked]
    kept = [c for c in ordered if c.mode != "neighbor" or c.order >= NEIGHBOR_MIN_PROBABILITY]
    before = {row: around_row[0] for row, around_row in around.items()}
    return Pool(ordered, [features[i] for i in ranked], [probability[i] for i in ranked], model, kept, before)


def _time_fit(ctx: Context, candidates: list[Candidate], direction: float) -> dict[int, float]:
    """Each candidate's place in time among the others, towards the end the query asks for (the
    share of the others on the far side of it); empty when the query names no direction."""
    if not direction or not candidates:
        return {}
    rows = orjson.dumps([c.document_row for c in candidates]).decode()
    created = dict(ctx.conn.execute(queries("ranking")["created_at"], {"rows": rows}))
    known = sorted(created.values())
    others = max(1, len(known) - 1)
    newer = {row: bisect_left(known, at) / others for row, at in created.items()}
    return newer if direction > 0 else {row: 1.0 - share for row, share in newer.items()}


# A turn of a conversation among people, as a transcript writes it: "Caroline: …", after the
# message's header line; one to three capitalized words.
_SPEAKER = re.compile(r"\A(?:\[[^\]\n]*\]\n)?([A-Z][\w'’.-]*(?: [A-Z][\w'’.-]*){0,2}):\s")


def _speaker_fit(candidates: list[Candidate], names: Sequence[str]) -> dict[int, float]:
    """Each candidate's speakerFit (FEATURES): whether the query names the person who speaks in
    it; `names`, the words the query writes as names (a lower-cased "summary" is no one's, so a
    note opening "Summary: …" is not taken for a person's turn). Empty when the query names no
    speaker of the pool (every candidate then gets 0)."""
    if not names:
        return {}
    speakers = {}
    for c in candidates:
        found = _SPEAKER.match(c.text) if c.kind != "tool-result" else None
        if found is not None:
            speakers[c.document_row] = found.group(1)
    named = speakers_named(names, set(speakers.values()))
    if not named:
        return {}
    return {row: 1.0 if name in named else -1.0 for row, name in speakers.items()}


def speakers_named(names: Sequence[str], speakers: Iterable[str]) -> set[str]:
    """Of `speakers`, those a query writing `names` (intent.names) names: every index term of the
    speaker's name is one of the names' ("Caroline's" names Caroline)."""
    wanted = set(terms(" ".join(names)))
    return {name for name in speakers if (spoken := terms(name)) and wanted.issuperset(spoken)}


# A time as a statement mentions one: a relative day or period, a weekday, a month, a year, a date,
# a time of day. "May" and the months' short forms are also a modal verb or a name ("May I ask",
# "Jan said"): they count after a word that introduces a time ("in May") or before a number.
_MONTH_ALONE = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\.?"
_TIME_MENTION = re.compile(
    r"(?i:\b(?:yesterday|today|tonight|tomorrow|ago|recently|lately|weekend|noon|midnight|o'clock"
    r"|(?:mon|tues|wednes|thurs|fri|satur|sun)days?"
    r"|(?:last|next|this|past|coming)\s+(?:week|month|year|night|morning|afternoon|evening|weekend"
    r"|summer|winter|spring|fall|autumn)"
    r"|the\s+other\s+day"
    r")\b)"
    r"|\b(?:January|February|March|April|June|July|August|September|October|November|December)\b"
    r"|\b(?i:in|on|of|since|until|till|by|during|early|late|mid|last|next|this|from|through|before|after)"
    rf"[\s-]+{_MONTH_ALONE}(?!\w)"
    rf"|\b{_MONTH_ALONE}\s*\d"
    r"|\b(?:19|20)\d\d\b|\b\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}\b"
    r"|\b\d{1,2}(?::[0-5]\d)?\s*(?i:[ap]\.?m)\b\.?|\b(?:[01]?\d|2[0-3]):[0-5]\d\b"
)


def mentions_time(text: str) -> bool:
    return _TIME_MENTION.search(text) is not None


def _time_mention(candidates: list[Candidate]) -> dict[int, float]:
    """Each candidate's timeMention (FEATURES) for a query that asks when: whether its text
    mentions a time."""
    return {c.document_row: 1.0 if mentions_time(c.text) else -1.0 for c in candidates}


@dataclass(frozen=True)
class Before:
    """What the ranker reads of the documents just before the candidates in their sessions."""

    asked: set[int]  # the windows that end asking a question, of the candidates and of those before them
    held: dict[int, set[str]]  # the query terms each window just before a candidate holds


def _before(ctx: Context, candidates: list[Candidate], around: dict, qterms: list[str]) -> Before:
    """The candidates' windows and each candidate's previous document's last window (`around`):
    which end asking a question and which query terms each holds."""
    texts = {c.window_id: c.text for c in candidates if c.window_id is not None}
    before = {around[c.document_row][1] for c in candidates if around.get(c.document_row)} - {None}
    held = {c.window_id: set(c.matched) for c in candidates if c.window_id in before}
    for window, read in terms_of_windows(ctx.conn, before - texts.keys()).items():  # only those not in hand
        texts[window] = read.text
        held[window] = {t for t in qterms if t in read.counts}
    return Before({window for window, text in texts.items() if ends_asking(text)}, held)


def ends_asking(text: str) -> bool:
    """Whether a window's last paragraph asks a question (structure.asks_question): a request
    and its answer in one window do not ask, the question before the answer being another
    paragraph."""
    return asks_question(text.rstrip().rpartition("\n\n")[2])


def _merge(lexical: list[Candidate], semantic: list[Candidate]) -> list[Candidate]:
    """One candidate per document, in pool order: the better-scored mode supplies the evidence
    shown (as fusion did), and it carries both modes' relevance."""
    merged: dict[int, Candidate] = {}
    for candidate in lexical + semantic:
        row = candidate.document_row
        held = merged.get(row)
        if held is None:
            merged[row] = replace(candidate, modes=[candidate.mode])
            continue
        better = candidate if candidate.score > held.score else held
        merged[row] = replace(
            better,
            modes=sorted({*held.modes, candidate.mode}),
            bm25=max(held.bm25, candidate.bm25),
            similarity=max(held.similarity, candidate.similarity),
            max_idf=max(held.max_idf, candidate.max_idf),
        )
    return list(merged.values())


def _neighbors(ctx: Context, sources: list[int], around: dict, held: set[int], qterms: list[str]) -> list[Candidate]:
    """The admissible documents just before and after the given ones, not in the pool yet."""
    outside: dict[int, int] = {}
    for source in sources:
        before, before_window, after, after_window = around.get(source, (None,) * 4)
        for row, window in ((before, before_window), (after, after_window)):
            if row is not None and window is not None and row not in held:
                outside.setdefault(row, window)
    return list(neighbor_candidates(ctx, admissible_neighbors(ctx, outside), qterms).values())


def _cosines(ctx: Context, vector: np.ndarray, windows: set[int]) -> dict[int, float]:
    """Cosine similarity of each window's stored embedding to the query's, its nearest piece's
    for a long window (windows not embedded are absent)."""
    if not windows:
        return {}
    import numpy as np  # a semantic step: the embeddings are loaded already

    found = ctx.conn.execute(queries("ranking")["window_vectors"], {"ids": orjson.dumps(sorted(windows)).decode()})
    query = vector / (np.linalg.norm(vector) or 1.0)
    cosine = {}
    for window, blob in found:
        # int8 (scaled: the norm divides it out), or float32 stored before migration 0018
        stored = np.frombuffer(blob, dtype=np.int8 if len(blob) == INT8_BYTES else np.float32).astype(np.float32)
        similarity = float(stored @ query / (np.linalg.norm(stored) or 1.0))
        cosine[window] = max(cosine.get(window, -1.0), similarity)
    return cosine


def _features(
    candidates: list[Candidate],
    around: dict,
    rank_lexical: dict[int, int],
    rank_semantic: dict[int, int],
    cosine: dict[int, float],
    idf: dict[str, float],
    anchored: set[int],
    fit: dict[int, float],
    speaker: dict[int, float],
    when: dict[int, float],
    earlier: Before,
) -> list[tuple[float, ...]]:
    """One row of FEATURES per candidate. For its neighbours' evidence, an exact hit counts as
    the best BM25F candidate; `earlier`, what the documents before the candidates hold (`_before`)."""
    query_idf = sum(idf.values()) or 1.0
    best_bm25 = max((c.bm25 for c in candidates), default=0.0) or 1.0
    bm25 = {c.document_row: c.bm25 / best_bm25 for c in candidates}
    strength = {**dict.fromkeys(anchored, 1.0), **bm25}
    similarity = {c.document_row: cosine.get(c.window_id, c.similarity) for c in candidates}
    best_cosine = max(similarity.values(), default=0.0)
    mass: dict[int | None, float] = {}
    for c in candidates:
        mass[c.session_row] = mass.get(c.session_row, 0.0) + bm25[c.document_row] + max(0.0, similarity[c.document_row])
    total = sum(mass.values()) or 1.0
    rows = []
    for c in candidates:
        row = c.document_row
        before, before_window, after, after_window = around.get(row, (None,) * 4)
        in_lexical = row in rank_lexical
        rows.append(
            (
                bm25[row],
                1.0 / (1 + rank_lexical[row]) if in_lexical else 0.0,
                c.coverage,
                calibration.lexical_score_of(c.coverage, c.matched),
                c.max_idf,
                float(in_lexical and not c.matched),
                similarity[row],
                similarity[row] - best_cosine if cosine else 0.0,
                1.0 / (1 + rank_semantic[row]) if row in rank_semantic else 0.0,
                sum(idf.get(t, 0.0) for t in c.matched) / query_idf,
                c.bm25 / query_idf,
                math.log1p(len(idf)),
                math.log1p(len(c.text) / 100),
                bm25[row] * similarity[row],
                strength.get(before, 0.0),
                strength.get(after, 0.0),
                cosine.get(before_window, 0.0),
                cosine.get(after_window, 0.0),
                mass[c.session_row] / total,
                float(c.kind == "tool-result"),
                fit.get(row, -1.0),
                speaker.get(row, 0.0),
                when.get(row, 0.0),
                float(c.window_id in earlier.asked),
                float(before_window in earlier.asked),
                sum(idf.get(t, 0.0) for t in earlier.held.get(before_window, set()).union(c.matched)) / query_idf,
            )
        )
    return rows
