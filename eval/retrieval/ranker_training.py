"""Training the learned ranker (cwa/retrieve/ranker.py): boosted trees per pool (lexical,
hybrid), fitted on the features search itself reports (`explain: true`).

Each pool candidate of a question is one example, labelled 1 when it is one of the question's
evidence turns. TREES trees of depth DEPTH are fitted to the logistic loss with second-order leaf
values (XGBoost's, in numpy), splits among BINS quantile thresholds per feature, each side keeping
MIN_LEAF examples. Deterministic: the same examples give the same trees.

    python eval/retrieval/train_ranker.py --data ../shared/data/locomo/locomo10.json

trains on every LoCoMo conversation and writes cwa/retrieve/ranker.json; `cwa eval locomo`
trains per fold itself and scores each conversation only with the fold that did not see it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import blake3
import numpy as np
import orjson

from cwa.retrieve.ranker import FEATURES, MODELS

TREES = 100
DEPTH = 3
BINS = 32
MIN_LEAF = 200
LEARNING_RATE = 0.1
L2 = 1.0


@dataclass
class Examples:
    """Per conversation: the feature rows and labels of every question's pool."""

    features: dict[str, list[np.ndarray]] = field(default_factory=dict)
    labels: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def add(self, conversation: str, features: list[list[float]], labels: list[int]) -> None:
        if not features:
            return
        self.features.setdefault(conversation, []).append(np.asarray(features, dtype=np.float64))
        self.labels.setdefault(conversation, []).append(np.asarray(labels, dtype=np.float64))

    def of(self, conversations: list[str], weights: dict[str, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Features, labels and each example's weight (its conversation's in `weights`, else 1)."""
        xs = [x for c in conversations for x in self.features.get(c, [])]
        ys = [y for c in conversations for y in self.labels.get(c, [])]
        ws = [np.full(len(y), weights.get(c, 1.0)) for c in conversations for y in self.labels.get(c, [])]
        if not xs:
            return np.zeros((0, len(FEATURES))), np.zeros(0), np.zeros(0)
        return np.vstack(xs), np.concatenate(ys), np.concatenate(ws)


def fit(x: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> dict[str, Any]:
    """Boosted regression trees for the logistic loss (second-order leaf values), each complete
    to DEPTH: splits are chosen among BINS quantile thresholds per feature; `w` weighs each
    example's loss (default 1). Without examples, a model that says 0.5 for everything (nothing
    to learn from)."""
    if not len(y):
        x, y = np.zeros((1, len(FEATURES))), np.array([0.5])
    w = np.ones(len(y)) if w is None or not len(w) else w
    edges = [np.unique(np.quantile(x[:, j], np.linspace(0, 1, BINS + 1)[1:-1])) for j in range(x.shape[1])]
    binned = np.stack([np.searchsorted(edges[j], x[:, j], side="right") for j in range(x.shape[1])], axis=1)
    mean = min(max(float(np.average(y, weights=w)), 1e-6), 1 - 1e-6)
    base = float(np.log(mean / (1 - mean)))
    log_odds = np.full(len(y), base)
    inner, leaves = 2**DEPTH - 1, 2**DEPTH
    features = np.zeros((TREES, inner), dtype=np.int64)
    thresholds = np.full((TREES, inner), np.inf)
    values = np.zeros((TREES, leaves))
    for tree in range(TREES):
        p = 1.0 / (1.0 + np.exp(-log_odds))
        g, h = w * (p - y), w * p * (1 - p)
        nodes = [np.arange(len(y))]
        for depth in range(DEPTH):
            children = []
            for offset, rows in enumerate(nodes):
                node = 2**depth - 1 + offset
                split = _best_split(binned[rows], g[rows], h[rows])
                if split is not None:
                    feature, at = split
                    features[tree, node], thresholds[tree, node] = feature, edges[feature][at]
                    right = x[rows, feature] >= thresholds[tree, node]
                    children += [rows[~right], rows[right]]
                else:  # no useful split: every row goes left (threshold +inf)
                    children += [rows, rows[:0]]
            nodes = children
        for leaf, rows in enumerate(nodes):
            values[tree, leaf] = -LEARNING_RATE * g[rows].sum() / (h[rows].sum() + L2) if len(rows) else 0.0
            log_odds[rows] += values[tree, leaf]
    return {
        "base": round(base, 6),
        "feature": features.tolist(),
        "threshold": [[float(f"{t:.9g}") if np.isfinite(t) else 1e308 for t in row] for row in thresholds],
        "leaf": [[round(float(v), 6) for v in row] for row in values],
    }


def _best_split(binned: np.ndarray, g: np.ndarray, h: np.ndarray) -> tuple[int, int] | None:
    """The (feature, bin) whose split gains the most, or None when no split keeps MIN_LEAF rows
    on each side and gains anything."""
    total_g, total_h, count = g.sum(), h.sum(), len(g)
    best, found = 0.0, None
    for feature in range(binned.shape[1]):
        column = binned[:, feature]
        left_g = np.cumsum(np.bincount(column, weights=g, minlength=BINS + 1))[:-1]
        left_h = np.cumsum(np.bincount(column, weights=h, minlength=BINS + 1))[:-1]
        left_n = np.cumsum(np.bincount(column, minlength=BINS + 1))[:-1]
        gain = (
            left_g**2 / (left_h + L2) + (total_g - left_g) ** 2 / (total_h - left_h + L2) - total_g**2 / (total_h + L2)
        )
        gain[(left_n < MIN_LEAF) | (count - left_n < MIN_LEAF)] = -1.0
        at = int(np.argmax(gain))
        if gain[at] > best:
            best, found = float(gain[at]), (feature, at)
    return found


def weights_file(
    models: dict[str, dict[str, Any]], trained_on: list[str], examples: dict[str, int], weights: dict[str, float]
) -> bytes:
    body = {
        "features": list(FEATURES),
        "models": models,
        "trainedOn": trained_on,
        "examples": examples,
        "weights": {c: weights[c] for c in trained_on if c in weights},  # groups not named count 1
    }
    body["fingerprint"] = "k1-" + blake3.blake3(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()[:24]
    return orjson.dumps(body, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def train(examples: dict[str, Examples], conversations: list[str], weights: dict[str, float] | None = None) -> bytes:
    """A weights file for both models, trained on the given conversations only; `weights`: a
    conversation's examples count this much each (default 1)."""
    models, counts = {}, {}
    for name in MODELS:
        x, y, w = examples[name].of(conversations, weights or {})
        models[name] = fit(x, y, w)
        counts[name] = int(len(y))
    return weights_file(models, conversations, counts, weights or {})


def collect(
    archive: Any, project: str, question: str, wanted: set[str], mode: dict[str, Any], key: str = "messageKey"
) -> tuple[list[list[float]], list[int]]:
    """One question's pool through the public search (`explain`), labelled by whether its `key`
    (a LoCoMo turn's message key, or a document id) is one of the wanted."""
    found = archive.search(
        {
            "project": project,
            "query": question,
            "limit": 10,
            "leaseSeconds": 0,
            "explain": True,
            "rerank": False,
            **mode,
        }
    )
    pool = found["ranking"]["pool"]
    return [c["features"] for c in pool], [int(c[key] in wanted) for c in pool]
