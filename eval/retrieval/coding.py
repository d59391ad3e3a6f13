"""Retrieval on synthetic coding sessions, with answers known by construction.

    cwa eval coding [--documents 3000] [--facts 160] [--seed 11] [--json]

The background is cwa/evaluation/sessions.py's generator (eval/retrieval/sessions.py) (turns and tool output: traces, JSON, git
logs). Into it go FACTS, each stated once in one document of a session and asked about later in
other words, so the document holding the answer is known:

- `identifier`: a symbol and its path, named in an assistant reply; asked by what it does.
- `error`: an error code in a tool result; asked by the code.
- `decision`: a decision stated in a user turn ("we settle on …"); asked with other words.
- `answer`: a question, then the answer in the next turn, which shares none of the question's
  words; asked with the question's words (what the context field is for).

Each question searches its project (limit 10) through the public search in each mode; R@k is
whether the fact's document is in the top k. The fused modes are the ranking before the learned
ranker, so a regression on coding sessions shows.

The learned ranker is also trained on such facts (`training_examples`), with TRAINING_SEED: the
evaluation's default seed differs, so its documents, names and subjects are others, but its
templates are the same, so these figures are in distribution for the ranker.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

from cwa.api import Archive
from cwa_eval.retrieval import ranker_training as training
from cwa_eval.retrieval.sessions import VOCABULARY, synthetic_sessions

MODES = {
    "fused-lexical": {"semanticPolicy": "never", "ranker": "fused", "rerank": False},
    "fused-auto": {"semanticPolicy": "auto", "ranker": "fused", "rerank": False},
    "fused-hybrid": {"semanticPolicy": "always", "ranker": "fused", "rerank": False},
    "lexical": {"semanticPolicy": "never", "ranker": "learned", "rerank": False},
    "auto": {"semanticPolicy": "auto", "ranker": "learned", "rerank": False},
    "hybrid": {"semanticPolicy": "always", "ranker": "learned", "rerank": False},
}
KS = (1, 5, 10)
PROJECT = "/bench/coding"
TRAINING_SEED = 5
TRAINING_DOCUMENTS = 3000
TRAINING_FACTS = 240
SUBJECTS = (
    "lease renewal",
    "invoice rounding",
    "webhook retries",
    "shard rebalancing",
    "token refresh",
    "cache eviction",
    "log rotation",
    "schema migration",
    "rate limiting",
    "snapshot pruning",
    "session expiry",
    "queue backpressure",
    "replica failover",
    "config reload",
    "upload resumption",
)
VERBS = (
    "fences stale writers",
    "rounds half-cents",
    "backs off exponentially",
    "moves hot shards",
    "refreshes expiring tokens",
    "evicts cold entries",
    "rotates the logs nightly",
    "migrates columns online",
    "throttles noisy tenants",
    "prunes old snapshots",
    "expires idle sessions",
    "slows the producers",
    "promotes a replica",
    "reloads without restart",
    "resumes partial uploads",
)
CHOICES = (
    "a 30 second cap",
    "banker's rounding",
    "jitter on every retry",
    "a two-phase move",
    "a sliding window",
    "least frequently used",
    "size-based rotation",
    "a shadow column",
    "a token bucket",
    "keeping seven days",
)


def _name(rng: random.Random) -> str:
    """A made-up word from the generator's rarer vocabulary, capitalized, twice."""
    return "".join(rng.choice(VOCABULARY[200:]).capitalize() for _ in range(2))


def facts(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """FACTS: the documents that state them (one or two) and the question that asks for them.
    Each fact's subject carries a made-up name, so no two facts answer the same question."""
    made = []
    for n in range(count):
        kind = ("identifier", "error", "decision", "answer")[n % 4]
        topic = n % len(SUBJECTS)
        subject = f"{_name(rng)} {SUBJECTS[topic]}"
        if kind == "identifier":
            symbol = _name(rng) + "Keeper"
            path = f"src/{rng.choice(('jobs', 'core', 'net'))}/{symbol.lower()}.py"
            stated = [("assistant", f"I added {symbol} in {path}; it {VERBS[topic]} for the {subject}.")]
            question = f"which class {VERBS[topic]} for {subject.split()[0]}?"
        elif kind == "error":
            code = f"ERR_{_name(rng).upper()}_{rng.randint(10, 99)}"
            stated = [("toolResult", f"$ make check\n{code}: {subject} failed after 3 attempts\nFAILED")]
            question = f"what did {code} say before?"
        elif kind == "decision":
            stated = [("user", f"Decision: for the {subject} we settle on {CHOICES[n % len(CHOICES)]}.")]
            question = f"what was decided about the {subject}?"
        else:
            reply = " ".join(rng.choice(VOCABULARY[200:]) for _ in range(6))
            stated = [
                ("user", f"How should the {subject} behave when its queue is empty?"),
                ("assistant", f"Fail fast: {reply}."),
            ]
            question = f"how does the {subject} behave on an empty queue?"
        made.append({"kind": kind, "stated": stated, "question": question})
    return made


def admit_corpus(archive: Archive, documents: int, planted: list[dict[str, Any]], seed: int) -> list[str]:
    """The background sessions with each fact's documents placed at a random point of one; the
    id of the document that answers each fact (for `answer`, the reply)."""
    rng = random.Random(seed)
    slots = sorted(rng.sample(range(documents), len(planted)))
    at_slot = dict(zip(slots, planted))
    answers: dict[int, str] = {}
    for n, request in enumerate(synthetic_sessions(documents, seed=seed, project=PROJECT)):
        archive.admit(request)
        fact = at_slot.get(n)
        if fact is None:
            continue
        for offset, (role, text) in enumerate(fact["stated"]):
            kind = "tool-result" if role == "toolResult" else "turn"
            message = {
                "role": role,
                "text": text,
                **({"toolName": "bash", "toolCallId": f"fact-{n}"} if kind == "tool-result" else {}),
            }
            found = archive.admit(
                {
                    "project": PROJECT,
                    "sessionId": request["sessionId"],
                    "kind": kind,
                    "createdAt": request["createdAt"] + 1 + offset,
                    "messages": [message],
                }
            )
            answers[id(fact)] = found["documentId"]  # the last stated document answers
    return [answers[id(f)] for f in planted]


def training_examples(folder: Path, pools: dict[str, dict[str, Any]]) -> dict[str, tuple[list, list]]:
    """Ranker examples from facts planted with TRAINING_SEED: per pool, (features, labels) of each
    question's pool (cwa/evaluation/ranker_training.py)."""
    planted = facts(random.Random(TRAINING_SEED), TRAINING_FACTS)
    found: dict[str, tuple[list, list]] = {name: ([], []) for name in pools}
    with Archive.open(folder / "coding-training.db") as archive:
        answers = admit_corpus(archive, TRAINING_DOCUMENTS, planted, TRAINING_SEED)
        archive.call("index-embed", {})
        for name, pool in pools.items():
            for fact, answer in zip(planted, answers):
                features, labels = training.collect(
                    archive, PROJECT, fact["question"], {answer}, pool, key="documentId"
                )
                found[name][0].append(features)
                found[name][1].append(labels)
    return found


def run(documents: int, count: int, seed: int) -> dict[str, Any]:
    planted = facts(random.Random(seed), count)
    report: dict[str, Any] = {"documents": documents, "facts": count, "seed": seed, "modes": {}}
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "coding.db") as archive:
        answers = admit_corpus(archive, documents, planted, seed)
        archive.call("index-embed", {})
        for mode, params in MODES.items():
            hits: dict[str, list[dict[str, float]]] = {}
            for fact, answer in zip(planted, answers):
                results = archive.search(
                    {"project": PROJECT, "query": fact["question"], "limit": 10, "leaseSeconds": 0, **params}
                )["results"]
                ranked = [r["documentId"] for r in results]
                hits.setdefault(fact["kind"], []).append({f"R@{k}": float(answer in ranked[:k]) for k in KS})
            every = [row for rows in hits.values() for row in rows]
            report["modes"][mode] = {
                "overall": _mean(every),
                "byKind": {kind: _mean(rows) for kind, rows in sorted(hits.items())},
            }
    return report


def _mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(sum(r[key] for r in rows) / len(rows), 4) for key in rows[0]}


def print_report(report: dict[str, Any]) -> None:
    print(f"{report['facts']} facts in {report['documents']} background documents (seed {report['seed']})")
    for mode, found in report["modes"].items():
        overall = "  ".join(f"{k} {v:.3f}" for k, v in found["overall"].items())
        kinds = "  ".join(f"{kind} {v['R@5']:.2f}" for kind, v in found["byKind"].items())
        print(f"{mode:14} {overall}   R@5 by kind: {kinds}")
