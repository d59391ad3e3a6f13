"""The context field and the learned ranker: a turn found through the words around it keeps only
its own bytes and evidence; exact anchors still lead; the shipped ranker loads from package data
and orders deterministically."""

from __future__ import annotations

import json
import marshal

import pytest

from cwa.api import Archive
from cwa.errors import InvalidRequest
from cwa.retrieve import ranker

P = "/work/app"


def turn(session, role, text, at):
    return {
        "project": P,
        "sessionId": session,
        "kind": "turn",
        "createdAt": at,
        "messages": [{"role": role, "text": text}],
    }


@pytest.fixture
def dialogue(db_path):
    with Archive.open(db_path) as archive:
        ids = [
            archive.admit(turn("s1", role, text, at))["documentId"]
            for role, text, at in (
                ("user", "Which port does the staging proxy in deploy/proxy.yaml listen on?", "2026-11-01T10:00:00Z"),
                ("assistant", "It listens on 8443 behind the load balancer.", "2026-11-01T10:01:00Z"),
                ("user", "Thanks. Next, the nightly backup window.", "2026-11-01T10:02:00Z"),
            )
        ]
        archive.admit(turn("s2", "user", "The proxy for the office printer is unrelated.", "2026-11-02T10:00:00Z"))
        archive.call("index-embed", {})
        yield archive, ids


def test_a_reply_found_through_its_context_recalls_only_its_own_bytes(dialogue):
    archive, ids = dialogue
    results = archive.search({"project": P, "query": "staging proxy port", "limit": 5, "semanticPolicy": "never"})[
        "results"
    ]
    reply = next(r for r in results if r["documentId"] == ids[1])
    assert reply["matchedTerms"] == [] and reply["termCoverage"] == 0.0  # its evidence is its own text
    recalled = archive.recall({"locator": reply["locator"]})
    assert recalled["status"] == "resolved"
    assert "8443" in recalled["text"] and "staging" not in recalled["text"] and "proxy" not in recalled["text"]
    # the question's exact anchor belongs to the question only
    exact = archive.search({"project": P, "query": "deploy/proxy.yaml", "limit": 5})["results"]
    assert [r["documentId"] for r in exact if r["matchType"].startswith("exact-")] == [ids[0]]


@pytest.mark.parametrize("policy", ["never", "always"])
def test_an_exact_anchor_still_ranks_first(dialogue, policy):
    archive, ids = dialogue
    found = archive.search(
        {
            "project": P,
            "query": "proxy listens on 8443 deploy/proxy.yaml",
            "limit": 5,
            "semanticPolicy": policy,
            "explain": True,
        }
    )
    results = found["results"]
    assert results[0]["documentId"] == ids[0] and results[0]["matchType"] == "exact-path"
    assert all(not r["matchType"].startswith("exact-") for r in results[1:])
    assert found["ranking"]["model"] == ("hybrid" if policy == "always" else "lexical")


def test_the_shipped_ranker_loads_from_package_data_and_orders_deterministically(dialogue):
    archive, _ = dialogue
    weights = ranker.load("")
    assert weights.source == "package" and weights.fingerprint.startswith("k1-")
    assert set(weights.models) == set(ranker.MODELS)
    for model in weights.models.values():  # complete trees over the known features
        inner = len(model.feature[0])
        assert len(model.feature) == len(model.threshold) == len(model.leaf) and (inner + 1) & inner == 0
        assert all(len(t) == inner for t in model.threshold) and all(len(v) == inner + 1 for v in model.leaf)
        assert all(0 <= f < len(ranker.FEATURES) for tree in model.feature for f in tree)
    assert ranker.load("") is weights  # loaded once per process
    request = {
        "project": P,
        "query": "what did the proxy listen on",
        "limit": 5,
        "semanticPolicy": "always",
        "explain": True,
        "leaseSeconds": 0,
    }
    first, second = archive.search(request), archive.search(request)
    assert first["ranking"] == second["ranking"]
    assert [r["documentId"] for r in first["results"]] == [r["documentId"] for r in second["results"]]
    pool = first["ranking"]["pool"]
    assert pool and [c["probability"] for c in pool] == sorted((c["probability"] for c in pool), reverse=True)


TREE = {"base": 0.0, "feature": [[2, 0, 0]], "threshold": [[0.9, 1e308, 1e308]], "leaf": [[-5.0, 0.0, 5.0, 0.0]]}


@pytest.mark.parametrize(
    "weights",
    [
        {"features": ["bm25"], "models": {}},  # other features
        {"features": "all", "models": {"lexical": {**TREE, "leaf": [[0.0, 1.0]]}}},  # leaves of another depth
        {"features": "all", "models": {"lexical": {**TREE, "feature": [[2, 0]], "threshold": [[0.9, 1e308]]}}},
        {"features": "all", "models": {"lexical": {**TREE, "feature": [[99, 0, 0]]}}},  # an unknown feature
        {"features": "all", "models": {"lexical": {**TREE, "leaf": [["x", 0.0, 5.0, 0.0]]}}},
    ],
)
def test_ranker_weights_that_are_not_complete_trees_of_these_features_are_refused(tmp_path, weights):
    if weights["features"] == "all":
        weights = {"features": list(ranker.FEATURES), "models": {"hybrid": TREE, **weights["models"]}}
    bad = tmp_path / "ranker.json"
    bad.write_text(json.dumps(weights))
    with pytest.raises(InvalidRequest) as raised:
        ranker.load(str(bad))
    assert raised.value.details["reason"] == "invalid-ranker"


def _trees(path, coverage_split: bool) -> str:
    """A one-tree ranker: by own term coverage (≥ 0.9: very likely, else unlikely), or flat."""
    inner = [2, 0, 0] if coverage_split else [0, 0, 0]
    threshold = [0.9, 1e308, 1e308] if coverage_split else [1e308] * 3
    leaf = [-5.0, 0.0, 5.0, 0.0] if coverage_split else [0.0] * 4
    model = {"base": 0.0, "feature": [inner], "threshold": [threshold], "leaf": [leaf]}
    path.write_text(json.dumps({"features": list(ranker.FEATURES), "models": {"lexical": model, "hybrid": model}}))
    return str(path)


def _archive_with_ranker(tmp_path, coverage_split: bool) -> Archive:
    from conftest import DISK_GUARD_OFF

    from cwa.config import load_settings

    config = tmp_path / "cfg" / "cwa" / "config.json"  # rankerPath is honoured from here only
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"rankerPath": _trees(tmp_path / "ranker.json", coverage_split)}))
    settings = load_settings(
        None, env={"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), **DISK_GUARD_OFF}
    )
    return Archive.open(tmp_path / "a.db", settings=settings)


def _admit_among_lunch_orders(archive: Archive, *texts: str) -> None:
    """`texts` and 17 unrelated turns, a session each: no turn is another's context."""
    lunch = (f"Lunch order number {n} for the {word} team." for n, word in enumerate("abcdefghijklmnopq"))
    for n, text in enumerate([*texts, *lunch]):
        archive.admit(turn(f"s{n}", "user", text, "2026-11-20T10:00:00Z"))


@pytest.mark.parametrize("coverage_split, outcome", [(True, "historical-snippet"), (False, "suppress")])
def test_a_snippet_needs_most_of_the_rankers_probability(tmp_path, coverage_split, outcome):
    with _archive_with_ranker(tmp_path, coverage_split) as archive:
        _admit_among_lunch_orders(
            archive,
            "The staging proxy listens on port 8443 behind the balancer.",
            "Port scans hit the staging firewall.",
        )
        found = archive.call(
            "preflight",
            {
                "project": P,
                "sessionId": "now",
                "messageKey": "m1",
                "text": "Remind me: which port does the staging proxy listen on?",
            },
        )
    diagnostics = found["diagnostics"]
    assert diagnostics["outcome"] == outcome
    assert diagnostics["metrics"]["mode"] == "lexical" and diagnostics["metrics"]["margin"] > 0.05
    if coverage_split:  # nearly all of the probability: the snippet shows the proxy's port
        assert diagnostics["metrics"]["probabilityShare"] > 0.9 and "8443" in found["modelVisibleText"]
    else:  # a flat ranker splits it evenly between the two: too ambiguous for a snippet
        assert diagnostics["reason"] == "ambiguous-snippet" and diagnostics["metrics"]["probabilityShare"] == 0.5
        assert found["modelVisibleText"] == ""


@pytest.mark.parametrize("coverage_split", [True, False])
def test_a_marker_needs_most_of_the_rankers_probability(tmp_path, coverage_split):
    """Two earlier turns share the message's concept: a marker stands on the one the ranker prefers
    (all of the message's words); a flat ranker prefers neither, and no marker is shown unless the
    request lowers `markerMinShare`."""
    with _archive_with_ranker(tmp_path, coverage_split) as archive:
        _admit_among_lunch_orders(
            archive,
            "Staff could carry tablets at the checkout so the checkout queue moves.",
            "Tablets for the stock room.",
        )

        def ask(session, **policy):  # a session each: a revealed source cools down in its session
            request = {
                "project": P,
                "sessionId": session,
                "messageKey": "m",
                "text": "could tablets move the checkout queue?",
            }
            return archive.call("preflight", {**request, **({"policy": policy} if policy else {})})

        found, lowered = ask("now"), ask("lowered", markerMinShare=0.5)
    diagnostics = found["diagnostics"]
    assert diagnostics["metrics"]["mode"] == "lexical"
    if coverage_split:
        assert (diagnostics["outcome"], diagnostics["metrics"]["probabilityShare"] > 0.9) == ("continuity-marker", True)
        assert found["modelVisibleText"] and found["hints"][0]["spans"]
    else:
        assert (diagnostics["reason"], diagnostics["metrics"]["probabilityShare"]) == ("ambiguous-marker", 0.5)
        assert found["modelVisibleText"] == "" and found["hints"] == []
    assert lowered["diagnostics"]["outcome"] == "continuity-marker"


def test_training_is_deterministic_and_learns_the_signal():
    import numpy as np

    from cwa_eval.retrieval import ranker_training as training

    rng = np.random.default_rng(3)
    x = rng.random((3000, len(ranker.FEATURES)))
    y = (x[:, 2] > 0.7).astype(float)  # coverage decides
    first, second = training.fit(x, y), training.fit(x, y)
    assert first == second
    model = ranker._model(first)
    p = np.asarray(model.probability(x))
    assert ((p > 0.5) == (y == 1)).mean() > 0.97  # a threshold between quantile bins costs a few
    splits = {
        f
        for features, thresholds in zip(first["feature"], first["threshold"])
        for f, t in zip(features, thresholds)
        if t < 1e308
    }
    assert 2 in splits


def test_the_compiled_trees_give_what_walking_each_tree_gives():
    import math
    import random

    rng = random.Random(5)
    for model in ranker.load("").models.values():
        splits = [t for tree in model.threshold for t in tree if t < ranker.NO_SPLIT]
        rows = [  # random values, and values exactly on a threshold (a row goes right at ≥)
            [rng.choice([rng.random(), rng.choice(splits), -1.0, 0.0, 1.0]) for _ in ranker.FEATURES]
            for _ in range(400)
        ]
        inner = len(model.feature[0])
        for row, p in zip(rows, model.probability(rows)):
            log_odds = model.base
            for feature, threshold, leaf in zip(model.feature, model.threshold, model.leaf):
                node = 0
                while node < inner:
                    node = 2 * node + (2 if row[feature[node]] >= threshold[node] else 1)
                log_odds += leaf[node - inner]
            assert p == pytest.approx(1.0 / (1.0 + math.exp(-log_odds)), rel=1e-12, abs=1e-15)


def test_the_compiled_trees_are_kept_per_user_and_a_bad_copy_is_compiled_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    source = "def log_odds(x):\n    s = 0.5\n    if x[0] >= 1.0:\n        s += 2.0\n    return s"

    def log_odds(code) -> list[float]:
        namespace: dict = {}
        exec(code, namespace)
        return [namespace["log_odds"]([v]) for v in (0.0, 1.0)]

    first = ranker._compiled(source)
    kept = list((tmp_path / "cache" / "cwa" / "models").glob("ranker-*.code"))
    assert len(kept) == 1 and log_odds(first) == [0.5, 2.5]
    # read back, not compiled again: a kept code object of other trees (under the same name) is what runs
    kept[0].write_bytes(marshal.dumps(compile(source.replace("2.0", "9.0"), "<ranker trees>", "exec")))
    assert log_odds(ranker._compiled(source)) == [0.5, 9.5]
    other = ranker._compiled(source.replace("2.0", "3.0"))  # other trees: another file
    assert log_odds(other) == [0.5, 3.5] and len(list(kept[0].parent.glob("ranker-*.code"))) == 2
    for damage in (b"", b"\x00garbage", marshal.dumps(42), marshal.dumps(compile("x = 1", "elsewhere", "exec"))):
        kept[0].write_bytes(damage)
        assert log_odds(ranker._compiled(source)) == [0.5, 2.5]
        assert marshal.loads(kept[0].read_bytes()).co_filename == "<ranker trees>"  # written again
    monkeypatch.setenv("XDG_CACHE_HOME", "/dev/null/cannot-be-a-folder")  # unwritable: compiled each time
    assert log_odds(ranker._compiled(source)) == [0.5, 2.5]


def test_a_group_of_examples_counts_as_much_as_its_weight():
    import numpy as np

    from cwa_eval.retrieval import ranker_training as training

    rng = np.random.default_rng(4)
    examples = training.Examples()
    for group, flip in (("real", False), ("generated", True)):  # the generated group says the opposite
        x = rng.random((3000, len(ranker.FEATURES)))
        examples.add(group, x.tolist(), [int((v > 0.7) != flip) for v in x[:, 2]])
    probe = rng.random((2000, len(ranker.FEATURES)))
    truth = probe[:, 2] > 0.7

    def agreement(weights: dict[str, float]) -> float:
        x, y, w = examples.of(["real", "generated"], weights)
        p = np.asarray(ranker._model(training.fit(x, y, w)).probability(probe))
        return float(((p > 0.5) == truth).mean())

    assert agreement({"generated": 0.1}) > 0.95  # outweighed ten to one: the real group decides
    assert agreement({"real": 0.1}) < 0.05  # and the other way round


def test_facts_inside_long_messages_are_found_by_the_learned_ranker_at_least_as_often_as_by_bm25f():
    # Long conversations state a fact inside a long answer or request. A ranker whose training
    # held only short evidence learned that evidence is short and ranked such messages below
    # BM25F's own order (with 2a14fce's ranker its top 10 held 23 of these 36 evidence messages,
    # BM25F's 25; with today's search, 22 against 28).
    from cwa_eval.retrieval.long_recall import run

    found = run([30_000], 3, 2, ["fused-lexical", "lexical"], 41, inside=True)["sizes"]["30000"]
    assert found["questions"] == 36  # one evidence message each: R@10 x 36 counts them
    recall = {mode: figures["overall"]["R@10"] for mode, figures in found["modes"].items()}
    assert recall["lexical"] >= recall["fused-lexical"] > 0


def test_echoes_say_the_users_statements_back_and_change_nothing_else():
    # `cwa eval long --echo`: the assistant's reply after each planted user statement restates it
    # in the second person; the history is otherwise the same, and the evidence stays the user's.
    from cwa_eval.retrieval.long_history import history, second_person

    plain, echoed = (history(41, 30_000, 2, inside=False, echo=echo) for echo in (False, True))
    assert [(f.kind, f.question, f.evidence) for f in plain.facts] == [
        (f.kind, f.question, f.evidence) for f in echoed.facts
    ]
    pairs = list(zip(plain.documents, echoed.documents, strict=True))
    changed = [(a, b) for a, b in pairs if a != b]
    assert changed and all(b["messages"][0]["role"] == "assistant" for _, b in changed)
    said = {m["key"]: m["text"] for d in plain.documents for m in d["messages"] if m["role"] == "user"}
    user_evidence = {key for f in plain.facts if f.kind in ("preference", "instruction") for key in f.evidence}
    restated = 0
    for before, (_, reply) in zip(plain.documents, pairs[1:]):
        key = before["messages"][0]["key"]
        if key in user_evidence:
            assert second_person(said[key]) in reply["messages"][0]["text"]
            restated += 1
    assert restated == len(user_evidence) > 0
    assert second_person("I'd rather we log JSON lines; my team asked me.") == (
        "you'd rather we log JSON lines; your team asked you."
    )
