"""`cwa eval perf` at 10K windows: the CI smoke test of the scale runner (no timing assertions;
the figures live in docs/performance.md)."""

from __future__ import annotations

import orjson
from conftest import hermetic_env, run_cwa

from cwa.api import Archive
from cwa.model_variants import active
from cwa.models import embedder
from cwa.store.reads import window_text
from cwa_eval.perf.pieces import BACKUP, GARDEN
from cwa_eval.perf.scale import FIRST_PREFLIGHT, OPERATIONS
from cwa_eval.perf.semantic import fill_synthetic


def test_the_runner_measures_every_operation_against_the_floor_at_10k_windows(tmp_path):
    out = run_cwa(
        ["eval", "perf", "--sizes", "10000", "--queries", "12", "--embed-sample", "32", "--json"],
        hermetic_env(tmp_path),
        timeout=900,
    )
    assert out.returncode == 0, out.stderr.decode()
    report = orjson.loads(out.stdout)
    assert report["coldVersion"]["runs"] == 7 and report["coldVersion"]["best_ms"] > 0
    assert [r["corpus"] for r in report["runs"]] == ["coding", "chat"]
    for found in report["runs"]:
        admission = found["admission"]
        assert admission["windows"] >= 10_000 and admission["textBytes"] > 0
        # the clock runs over the admission calls alone, not over making the corpus up
        assert 0 < admission["seconds"] < admission["wallSeconds"], admission
        assert found["embedding"]["embedded"] == 32
        assert found["embedding"]["embedded"] + found["embedding"]["syntheticVectors"] >= admission["windows"] - 1000
        # a first serve's preflight, then the common terms kept as a default serve keeps them
        assert found["latency"][FIRST_PREFLIGHT]["n"] == 12
        # at 10K windows a few of each corpus's words are in more than 5,000 of them
        assert found["termCountsKept"]["terms"] > 0 and found["termCountsKept"]["seconds"] >= 0, found["termCountsKept"]
        for name in OPERATIONS:
            if name == "exact" and found["corpus"] == "chat":
                continue  # short chat turns may hold no identifiers to look up
            timing = found["latency"][name]
            assert timing["n"] >= 10 and 0 < timing["p50_ms"] <= timing["p95_ms"] <= timing["p99_ms"], name
        assert found["floor"]["lexical"]["n"] == 12 and found["floor"]["windowsPerSecond"] > 0
        size = found["bytes"]
        # dbstat's pages plus the free list are the whole file (within the header page and
        # pointer-map pages), and vectors are the difference the embedding made.
        assert 0.97 * size["file"] <= sum(size["kinds"].values()) <= size["file"]
        assert size["kinds"]["vectors"] > found["bytesBeforeEmbedding"]["kinds"]["vectors"]
        assert size["withoutVectors"] < size["perTextByte"]
        assert 20 * 2**20 < found["servePeakRssBytes"] < 4 * 2**30
        assert found["coldCallSearch"]["runs"] == 3


def test_bad_sizes_and_corpora_are_refused_before_any_work(tmp_path):
    for args, reason in (
        (["--sizes", "12"], "invalid-size"),
        (["--sizes", "ten"], "invalid-size"),
        (["--corpora", "novels"], "unknown-corpus"),
    ):
        out = run_cwa(["eval", "perf", *args, "--json"], hermetic_env(tmp_path))
        assert out.returncode != 0
        error = orjson.loads(out.stdout)["error"]
        assert error["code"] == "invalid-request" and error["details"]["reason"] == reason


def test_synthetic_vectors_are_as_many_as_the_model_s_pieces(tmp_path):
    # the runner's "with vectors" bytes are those of a real archive only if a window longer than
    # a piece gets a vector a piece, as the model embeds it
    with Archive.open(tmp_path / "a.db") as archive:
        for n, text in enumerate([BACKUP, GARDEN + " " + BACKUP]):
            archive.admit(
                {
                    "project": "p",
                    "sessionId": "s",
                    "kind": "turn",
                    "retentionClass": "conversation",
                    "createdAt": f"2026-01-0{n + 1}T00:00:00Z",
                    "messages": [{"role": "assistant", "text": text}],
                }
            )
        conn = archive.conn
        contents = conn.execute(
            "SELECT content_hash, document_row, start_byte, end_byte, first_message, last_message FROM windows"
        ).fetchall()
        texts = [window_text(conn, *row[1:]) for row in contents]
        pieces = dict(zip((row[0] for row in contents), embedder(active(archive.path)).piece_counts(texts)))
        assert max(pieces.values()) > 1
        assert fill_synthetic(archive) == sum(pieces.values())
        stored = dict(conn.execute("SELECT content_hash, count(*) FROM window_embeddings GROUP BY content_hash"))
        assert stored == pieces
        assert conn.execute("SELECT count(*) FROM window_vectors").fetchone()[0] == sum(pieces.values())
        assert conn.execute("SELECT count(*) FROM embedding_queue").fetchone()[0] == 0
