"""The cross-encoder rerank path, with a tiny ONNX cross-encoder built here (no real one ships)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest
from conftest import DISK_GUARD_OFF
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer

from cwa.api import Archive
from cwa.config import load_settings
from cwa.models import locate

PROJECT = "/work/rr"


def build_cross_encoder(folder, favoured_word: str) -> None:
    """logits = Σ over passage tokens of w[token]: only `favoured_word` weighs (5.0)."""
    tokenizer_path = locate().tokenizer
    shutil.copy(tokenizer_path, folder / "tokenizer.json")
    vocab = Tokenizer.from_file(str(tokenizer_path)).get_vocab()
    weights = np.zeros((len(vocab), 1), dtype=np.float32)
    weights[vocab[favoured_word], 0] = 5.0
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["w", "input_ids"], ["g"]),
            helper.make_node("Squeeze", ["g", "two"], ["per_token"]),
            helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
            helper.make_node("Cast", ["token_type_ids"], ["passage"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["per_token", "mask"], ["masked"]),
            helper.make_node("Mul", ["masked", "passage"], ["passage_only"]),
            helper.make_node("ReduceSum", ["passage_only", "one"], ["logits"], keepdims=1),
        ],
        "tiny-cross-encoder",
        [
            helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
            for n in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])],
        [
            numpy_helper.from_array(weights, "w"),
            numpy_helper.from_array(np.array([2], dtype=np.int64), "two"),
            numpy_helper.from_array(np.array([1], dtype=np.int64), "one"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(folder / "model.onnx"))


def open_archive(tmp_path, folder, **env):
    config = tmp_path / "cfg" / "cwa" / "config.json"  # rerankerPath is honoured from here only
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"rerankerPath": str(folder)}))
    settings = load_settings(
        None, env={"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), **DISK_GUARD_OFF, **env}
    )
    archive = Archive.open(tmp_path / "a.db", settings=settings)
    texts = [
        ("garden plans for spring: tomatoes and basil", "We planned the garden beds for spring."),
        ("the garden plans again, with tomatoes", "Pixel the cat sleeps in the garden all spring."),
        ("ERR_GARDEN_42 broke the watering job", "The watering job failed with ERR_GARDEN_42."),
    ]
    for n, (user, assistant) in enumerate(texts):  # a session each: no turn is another's context
        archive.admit(
            {
                "project": PROJECT,
                "sessionId": f"s{n}",
                "kind": "turn",
                "messages": [{"role": "user", "text": user}, {"role": "assistant", "text": assistant}],
            }
        )
    return archive


def ask(archive, query):
    return archive.search(
        {
            "project": PROJECT,
            "query": query,
            "limit": 3,
            "leaseSeconds": 0,
            "semanticPolicy": "never",
            "expansion": False,
            "ranker": "fused",
        }
    )


def test_reranker_reorders_only_its_tier_and_never_changes_scores(tmp_path):
    folder = tmp_path / "reranker"
    folder.mkdir()
    plain = open_archive(tmp_path / "a", tmp_path / "nowhere")
    before = ask(plain, "garden plans spring")
    plain.close()
    build_cross_encoder(folder, "pixel")
    archive = open_archive(tmp_path / "b", folder)
    after = ask(archive, "garden plans spring")
    assert before["reranked"] is False and after["reranked"] is True
    assert before["results"][0]["snippet"].startswith("garden plans for spring")
    assert "Pixel" in after["results"][0]["snippet"]  # the favoured passage moved up
    assert all(r["reranked"] for r in after["results"] if r["matchType"] in ("bm25", "semantic"))
    scores = lambda r: sorted((x["documentId"], x["score"]) for x in r["results"])  # noqa: E731
    assert scores(after) == scores(before)
    exact = ask(archive, "ERR_GARDEN_42 garden plans pixel")
    assert exact["results"][0]["matchType"] == "exact-error" and exact["results"][0]["reranked"] is False
    archive.close()


def test_reranker_candidate_window_is_capped(tmp_path):
    folder = tmp_path / "reranker"
    folder.mkdir()
    build_cross_encoder(folder, "pixel")
    archive = open_archive(tmp_path, folder, CWA_RERANKER_CANDIDATES="1")
    found = ask(archive, "garden plans spring")
    assert [r["reranked"] for r in found["results"]][:2] == [True, False]
    archive.close()


@pytest.mark.parametrize("damage", ["missing", "garbage", "disabled"])
def test_reranker_degrades_silently(tmp_path, damage):
    folder = tmp_path / "reranker"
    folder.mkdir()
    build_cross_encoder(folder, "pixel")
    if damage == "missing":
        (folder / "model.onnx").unlink()
    elif damage == "garbage":
        (folder / "model.onnx").write_bytes(b"not an onnx graph")
    extra = {"CWA_RERANKER_ENABLED": "false"} if damage == "disabled" else {}
    archive = open_archive(tmp_path, folder, **extra)
    found = ask(archive, "garden plans spring")
    assert found["reranked"] is False
    assert found["results"][0]["snippet"].startswith("garden plans for spring")
    archive.close()


def test_locomo_runner_has_a_rerank_mode_when_a_reranker_is_installed(tmp_path):
    import orjson
    from conftest import hermetic_env, run_cwa

    folder = tmp_path / "reranker"
    folder.mkdir()
    build_cross_encoder(folder, "violin")
    env = hermetic_env(tmp_path)
    config = tmp_path / "home" / ".config" / "cwa" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"rerankerPath": str(folder)}))
    turns = [
        {"speaker": "Ana", "dia_id": f"D1:{i}", "text": text}
        for i, text in enumerate(
            ["I adopted a cat.", "The violin lessons start soon.", "Ben plays music.", "Music is fun, lessons too."], 1
        )
    ]
    data = tmp_path / "locomo.json"
    data.write_bytes(
        orjson.dumps(
            [
                {
                    "sample_id": "c",
                    "conversation": {"session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": turns},
                    "qa": [{"question": "When do Ben's music lessons start?", "evidence": ["D1:2"], "category": 1}],
                }
            ]
        )
    )
    out = run_cwa(
        ["eval", "locomo", "--data", str(data), "--modes", "hybrid,hybrid+rerank", "--no-coding-training", "--json"],
        env,
    )
    assert out.returncode == 0, out.stderr
    report = orjson.loads(out.stdout)
    assert set(report["modes"]) == {"hybrid", "hybrid+rerank"} and "skipped" not in report
    assert report["modes"]["hybrid"]["overall"]["R@1"] == 0.0  # BM25F prefers the music-and-lessons turn
    assert report["modes"]["hybrid+rerank"]["overall"]["R@1"] == 1.0  # the model favours the violin turn
