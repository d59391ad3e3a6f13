"""The runtime embedding graph (the default), `cwa models optimize` (which measures it and may go back to the packaged graph) and `cwa models install*` (the only
code that downloads; here offline, against a closed port and a local HTTP server)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import threading

import orjson
import pytest

from cwa import model_variants, models
from cwa.api import Archive
from cwa.errors import EXIT_CODES, Conflict, ModelMissing
from cwa.models import Embedder, locate, runtime_graph
from tests.conftest import hermetic_env, run_cwa
from tests.test_rerank import build_cross_encoder

P = "/work/variants"
TOPICS = [
    "retry policy",
    "cache eviction",
    "lock timeout",
    "upload quota",
    "schema migration",
    "flaky test",
    "disk usage",
    "release notes",
    "token budget",
    "vector index",
]


def admit_windows(archive, count: int) -> None:
    for i in range(count):
        topic = TOPICS[i % len(TOPICS)]
        archive.admit(
            {
                "project": P,
                "sessionId": f"s{i % 3}",
                "kind": "turn",
                "messages": [
                    {"role": "user", "text": f"Note {i}: what did we learn about the {topic} in module m{i}?"},
                    {
                        "role": "assistant",
                        "text": f"In module m{i} the {topic} needed change number {i * 7}; we "
                        f"measured it twice, wrote test case t{i} and left a comment for later.",
                    },
                ],
            }
        )


def test_too_few_windows_is_a_typed_refusal_that_writes_nothing(db_path):
    with Archive.open(db_path) as archive:
        admit_windows(archive, 5)
        with pytest.raises(Conflict) as raised:
            archive.call("models-optimize", {})
        assert raised.value.details["reason"] == "too-few-windows"
    assert not (db_path.parent / "models" / model_variants.MANIFEST).exists()


@pytest.mark.parametrize("verdict", ["accepted", "rejected"])
def test_optimize_measures_and_a_loser_goes_back_to_the_packaged_graph(db_path, monkeypatch, verdict):
    # The real speed decides in use; here the threshold is set so that each verdict is exercised.
    monkeypatch.setattr(model_variants, "MIN_SPEEDUP", 0.0 if verdict == "accepted" else 1000.0)
    runtime = runtime_graph(locate())
    with Archive.open(db_path) as archive:
        admit_windows(archive, 60)
        # by default an archive embeds with the runtime graph
        assert archive.call("index-embed", {})["fingerprint"] == runtime.fingerprint != locate().fingerprint
        report = archive.call("models-optimize", {})
        built = runtime.weights
        assert report["file"] == str(built)
        assert built.is_file() and hashlib.sha256(built.read_bytes()).hexdigest() == report["sha256"]
        assert report["windows"] == 60 and report["meanCosine"] >= 0.98
        for side in ("original", "optimized"):
            assert report["measured"][side]["msPerWindow"] > 0
            assert 0.9 <= report["measured"][side]["knownItemR@10"] <= 1.0
        original, optimized = report["measured"]["original"], report["measured"]["optimized"]
        recall_kept = (
            optimized["knownItemR@1"] >= original["knownItemR@1"]
            and optimized["knownItemR@10"] >= original["knownItemR@10"]
        )
        # the verdict is exactly the documented rule (speed is the only criterion this test sets)
        assert report["accepted"] is (verdict == "accepted" and recall_kept and report["meanCosine"] >= 0.98)
        used = model_variants.active(db_path)
        status = archive.call("models-status", {})["archive"]
        assert status["optimized"]["accepted"] is report["accepted"]
        assert status["model"]["fingerprint"] == used.fingerprint == report["fingerprint"]
        if report["accepted"]:
            assert used == runtime
            assert archive.call("index-embed", {})["modelChanged"] is False
            return
        assert used == locate()
        # the runtime graph's vectors are not mixed in: search stays lexical until re-embedded
        before = archive.search(
            {"project": P, "query": "what changed in the eviction of cached entries", "semanticPolicy": "always"}
        )
        assert before["semantic"]["used"] is False
        embedded = archive.call("index-embed", {})
        assert embedded["modelChanged"] is True and embedded["fingerprint"] == locate().fingerprint
        after = archive.search(
            {"project": P, "query": "what changed in the eviction of cached entries", "semanticPolicy": "always"}
        )
        assert after["semantic"]["used"] is True


def test_a_verdict_on_another_model_is_ignored(db_path):
    folder = db_path.parent / "models"
    folder.mkdir(parents=True)
    (folder / model_variants.MANIFEST).write_bytes(
        orjson.dumps({"accepted": False, "source": "minilm-l6-v2:0000000000000000", "file": "v.onnx"})
    )
    assert model_variants.active(db_path) == runtime_graph(locate())


def test_without_onnx_the_packaged_graph_is_used(db_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(db_path.parent / "empty-cache"))  # not built here yet
    monkeypatch.setattr(models, "_onnx_installed", lambda: False)
    assert model_variants.active(db_path) == locate()


def test_a_cache_that_cannot_be_written_keeps_the_packaged_graph(db_path, tmp_path, monkeypatch):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert model_variants.active(db_path) == locate()  # not a runtime graph that could never be built
    with Archive.open(db_path) as archive:
        admit_windows(archive, 45)
        assert archive.call("index-embed", {})["fingerprint"] == locate().fingerprint
        with pytest.raises(ModelMissing) as raised:
            archive.call("models-optimize", {})
        assert raised.value.details["reason"] == "cache-unwritable"


def test_a_damaged_runtime_graph_is_built_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    runtime = runtime_graph(locate())
    runtime.weights.parent.mkdir(parents=True)
    runtime.weights.write_bytes(b"half a graph")
    vectors = Embedder(runtime).embed(["the upload quota was raised"])
    assert vectors.shape == (1, 384) and runtime.weights.stat().st_size > 1_000_000


def test_the_runtime_graph_is_built_once_keeps_its_weights_int8_and_embeds_like_the_package(tmp_path, monkeypatch):
    import numpy as np
    import onnx

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    runtime = runtime_graph(locate())
    assert runtime.weights.parent == tmp_path / "cache" / "cwa" / "models" and not runtime.weights.exists()
    assert model_variants.variant_status(tmp_path / "a.db")["model"] == {
        "variant": "int8-dynamic-per-channel",
        "fingerprint": runtime.fingerprint,
        "weights": str(runtime.weights),
        "built": False,
    }
    texts = [f"the {topic} of module m{i} changed twice last week" for i, topic in enumerate(TOPICS)]
    vectors = Embedder(runtime).embed(texts)
    stamp = runtime.weights.stat().st_mtime_ns
    assert model_variants.variant_status(tmp_path / "a.db")["model"]["built"] is True
    again = Embedder(runtime).embed(texts)
    assert runtime.weights.stat().st_mtime_ns == stamp  # loaded again, not rebuilt
    assert [p.name for p in runtime.weights.parent.iterdir()] == [runtime.weights.name]  # no build left over
    assert np.allclose(vectors, again, atol=1e-6)
    # int8 at run time: the matrix products are integer ones, and no float32 weight matrix is left
    graph = onnx.load(str(runtime.weights)).graph
    assert sum(n.op_type == "MatMulInteger" for n in graph.node) >= 36  # 6 layers x (q, k, v, out, 2 ffn)
    float_bytes = sum(int(np.prod(t.dims)) * 4 for t in graph.initializer if t.data_type == onnx.TensorProto.FLOAT)
    assert float_bytes < 2_000_000, float_bytes  # biases and norms only; the weights were 90 MB in float32
    packaged = Embedder(locate()).embed(texts)
    assert float((vectors * packaged).sum(axis=1).min()) >= 0.98


# --- install: the only code that downloads ------------------------------------------------------


class _Repo(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep test output quiet
        pass


@pytest.fixture
def hub(tmp_path):
    """A local stand-in for the model hub serving a tiny random cross-encoder under the pinned
    paths: it downloads fine but is not the pinned model."""
    from cwa.model_install import RERANKER

    root = tmp_path / "hub"
    folder = root / RERANKER.repo / "resolve" / RERANKER.revision
    (folder / "onnx").mkdir(parents=True)
    build_cross_encoder(folder, "garden")
    (folder / "model.onnx").rename(folder / "onnx" / "model.onnx")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Repo, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_install_offline_fails_clearly_and_leaves_nothing(tmp_path):
    env = {**hermetic_env(tmp_path), "HF_ENDPOINT": "http://127.0.0.1:9", "XDG_DATA_HOME": str(tmp_path / "data")}
    for command in ("install", "install-reranker"):
        out = run_cwa(["models", command, "--json"], env)
        assert out.returncode == EXIT_CODES["download-failed"], out.stderr
        error = orjson.loads(out.stdout)["error"]
        assert error["code"] == "download-failed" and error["details"]["reason"] == "unreachable"
        assert b"Traceback" not in out.stderr
        human = run_cwa(["models", command], env)
        assert human.returncode == EXIT_CODES["download-failed"] and b"network" in human.stderr
    models = tmp_path / "data" / "cwa" / "models"
    assert not models.exists() or not any(models.iterdir())


def test_install_refuses_a_model_that_fails_its_identity_check(tmp_path, hub):
    env = {**hermetic_env(tmp_path), "HF_ENDPOINT": hub, "XDG_DATA_HOME": str(tmp_path / "data")}
    out = run_cwa(["models", "install-reranker", "--json"], env)
    assert out.returncode == EXIT_CODES["download-failed"]
    error = orjson.loads(out.stdout)["error"]
    assert error["code"] == "download-failed" and error["details"]["reason"] == "identity-check"
    models = tmp_path / "data" / "cwa" / "models"
    assert not (models / "reranker").exists() and not any(models.iterdir())  # staging removed too
    missing = run_cwa(["models", "install", "--json"], env)  # the hub has no embedding model: 404
    assert (
        missing.returncode == EXIT_CODES["download-failed"]
        and orjson.loads(missing.stdout)["error"]["details"]["reason"] == "http-error"
    )
