"""The local embedding model, the semantic index and hybrid fusion, with the real model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest
from conftest import DISK_GUARD_OFF, hermetic_env, run_cwa

from cwa import models
from cwa.api import Archive
from cwa.config import load_settings, user_config_path
from cwa.errors import EXIT_CODES, InvalidRequest
from cwa.models import (
    BATCH,
    BATCH_TOKENS,
    MAX_PIECES,
    MAX_TOKENS,
    embedder,
    length_batches,
    locate,
    runtime_graph,
    status,
    text_pieces,
)
from cwa.retrieve.candidate import Candidate
from cwa.retrieve.fusion import fuse
from cwa_eval.perf.pieces import BACKUP, GARDEN
from cwa_eval.perf.pieces import QUESTION as BACKUP_QUERY

PROJECT = "/work/sem"
CORPUS = [
    ("The deployment failed because the server ran out of disk space.", "Cleared old logs; deploy works again."),
    ("Add a dark mode toggle to the settings page.", "Added the toggle and stored the choice."),
    ("Rename the customers table column.", "Wrote the migration for the rename."),
    ("The login form rejects valid passwords with ERR_AUTH_417.", "Fixed the hash comparison in auth.py."),
    ("Translate the onboarding emails into German.", "Added German templates for all five emails."),
]


def settings_for(tmp_path, semantic: bool = True):
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), **DISK_GUARD_OFF}
    if not semantic:
        env["CWA_SEMANTIC_RETRIEVAL"] = "false"
    return load_settings(None, env=env)


@pytest.fixture
def archive(tmp_path):
    with Archive.open(tmp_path / "a.db", settings=settings_for(tmp_path)) as opened:
        for user, assistant in CORPUS:
            opened.admit(
                {
                    "project": PROJECT,
                    "sessionId": "s1",
                    "kind": "turn",
                    "messages": [{"role": "user", "text": user}, {"role": "assistant", "text": assistant}],
                }
            )
        yield opened


def search(archive, query, **extra):
    return archive.search({"project": PROJECT, "query": query, "limit": 3, "leaseSeconds": 0, **extra})


def test_quickstart_similarities_match_the_reference_model():
    vectors = embedder().embed(["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."])
    similarity = vectors @ vectors.T
    assert abs(similarity[0, 1] - 0.6660) < 0.01
    assert abs(similarity[0, 2] - 0.1046) < 0.01
    assert abs(similarity[1, 2] - 0.1411) < 0.01
    assert vectors.shape == (3, 384)


@pytest.mark.parametrize("graph", ["packaged", "runtime"])
def test_texts_of_any_length_embed_alike_alone_or_in_a_batch(graph):
    # embed() groups texts by length into runs of bounded size and pads each run to its longest
    # text (the runtime graph runs each alone); a text's vector must not depend on its
    # neighbours, its position or the padding.
    model = embedder(locate() if graph == "packaged" else runtime_graph(locate()))
    texts = ["ok", "The weather is lovely today.", "", "retry " * 400, "He drove to the stadium."] + [
        " ".join(f"word{n}" for n in range(k)) for k in range(1, 120, 7)
    ]
    together = model.embed(texts)
    alone = [model.embed([text])[0] for text in texts]
    for vector, single in zip(together, alone):
        assert float(vector @ single) > 0.9999
    assert model.embed([]).shape == (0, 384)


def test_a_long_text_is_embedded_a_piece_at_a_time_not_cut_at_its_first_256_tokens():
    model = embedder(runtime_graph(locate()))
    told = GARDEN + " " + BACKUP
    assert model.piece_counts([BACKUP, GARDEN, told]) == [1, 2, 2]
    vectors, owners, numbers = model.embed_pieces([BACKUP_QUERY, GARDEN, told])
    assert numbers == [0, 0, 1, 0, 1]
    later, _, later_numbers = model.embed_pieces([BACKUP_QUERY, GARDEN, told], start=1)
    assert later_numbers == [1, 1] and np.allclose(later, vectors[[2, 4]], atol=1e-6)
    owners = np.asarray(owners)
    query, garden, pieces = vectors[0], vectors[owners == 1], vectors[owners == 2]
    assert len(garden) == len(pieces) == 2
    # the first pieces are the same 256 tokens: all a cut at 256 tokens kept of either text
    assert float(pieces[0] @ garden[0]) > 0.9999
    # the piece that tells why the backup failed is near the question; no piece of the garden is
    assert float((pieces @ query).max()) > float((garden @ query).max()) + 0.2
    # a text's one vector (a query's) is its pieces' mean weighted by their tokens, normalized
    whole = model.embed([told])[0]
    assert abs(float(np.linalg.norm(whole)) - 1.0) < 1e-5
    assert float(whole @ pieces[0]) > float(whole @ pieces[1]) > 0.3  # the first piece has more tokens
    # pieces keep [CLS] and [SEP] around at most MAX_TOKENS, and at most MAX_PIECES of them
    ids = [101, *range(1000, 3000), 102]
    cut = text_pieces(ids)
    assert len(cut) == MAX_PIECES and all(len(p) <= MAX_TOKENS and p[0] == 101 and p[-1] == 102 for p in cut)
    assert [t for p in cut for t in p[1:-1]] == ids[1 : 1 + MAX_PIECES * (MAX_TOKENS - 2)]
    assert text_pieces(ids[:MAX_TOKENS]) == [ids[:MAX_TOKENS]]


def test_pieces_are_counted_a_batch_at_a_time_in_order_to_the_last_text(monkeypatch):
    model = embedder(runtime_graph(locate()))
    texts = [BACKUP, GARDEN, GARDEN + " " + BACKUP, "", BACKUP, GARDEN, GARDEN + " " + GARDEN]
    whole = model.piece_counts(texts)
    monkeypatch.setattr(models, "COUNT_BATCH", 3)  # three batches, the last of one text
    assert model.piece_counts(texts) == whole == [1, 2, 2, 1, 1, 2, 3]


def test_one_model_serves_concurrent_calls():
    # `cwa serve` shares one model between its embedding worker and requests, without a lock
    import threading

    model = embedder(runtime_graph(locate()))
    texts = [f"call {n}: " + " ".join(f"word{n * k}" for k in range(n * 9 + 3)) for n in range(12)]
    expected = model.embed(texts)
    found: dict[int, object] = {}

    def embed(n: int) -> None:
        found[n] = [model.embed(texts) for _ in range(3)]

    threads = [threading.Thread(target=embed, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(found) == [0, 1, 2, 3]
    for runs in found.values():
        for vectors in runs:
            assert np.allclose(vectors, expected, atol=1e-6)


def test_model_runs_stay_within_their_text_and_token_bounds():
    lengths = [256, 3, 40, 256, 12, 128, 7] + [20] * 100
    runs = length_batches(lengths)
    assert sorted(i for run in runs for i in run) == list(range(len(lengths)))
    for run in runs:
        assert len(run) <= BATCH
        assert len(run) == 1 or len(run) * max(lengths[i] for i in run) <= BATCH_TOKENS


def test_models_status_names_files_and_fingerprint():
    found = status()["embedding"]
    assert found["installed"] and found["dimensions"] == 384 and found["fingerprint"].startswith("minilm-l6-v2:")


def test_admission_queues_and_embed_drains(archive):
    assert archive.call("models-status", {})["archive"]["pendingWindows"] == len(CORPUS)
    before = search(archive, "why did the release break? storage was full")
    assert before["semantic"]["used"] is False and before["semantic"]["pendingWindows"] == len(CORPUS)
    result = archive.call("index-embed", {})
    assert result["embedded"] == len(CORPUS) and result["pending"] == 0 and result["modelChanged"] is False
    # an identical window shares its vector: nothing new to embed
    archive.admit(
        {
            "project": PROJECT,
            "sessionId": "s2",
            "kind": "turn",
            "messages": [{"role": "user", "text": CORPUS[1][0]}, {"role": "assistant", "text": CORPUS[1][1]}],
        }
    )
    assert archive.call("models-status", {})["archive"]["pendingWindows"] == 0


def test_rebuild_keeps_vectors_and_search_results(archive):
    archive.call("index-embed", {})
    before = search(archive, "why did the release break? storage was full")
    archive.call("index-rebuild", {})
    assert archive.call("models-status", {})["archive"]["pendingWindows"] == 0  # content-keyed: nothing to redo
    after = search(archive, "why did the release break? storage was full")
    strip = lambda r: [(x["documentId"], x["score"], x["modes"]) for x in r["results"]]  # noqa: E731
    assert strip(after) == strip(before)


def test_semantic_rescue_finds_a_paraphrase_with_no_shared_word(archive):
    archive.call("index-embed", {})
    response = search(archive, "why did the release break? storage was full")
    assert response["semantic"]["used"] is True
    top = response["results"][0]
    assert "disk space" in top["snippet"] and "semantic" in top["modes"]
    assert top["matchType"] == "semantic"


def test_an_exact_hit_stays_first_whatever_the_embeddings_say(archive):
    archive.call("index-embed", {})
    response = search(archive, "ERR_AUTH_417 storage full release broke", semanticPolicy="always")
    assert response["results"][0]["matchType"] == "exact-error"
    assert "ERR_AUTH_417" in response["results"][0]["snippet"]


def test_semantic_off_is_byte_identical_to_the_lexical_path(archive, tmp_path):
    archive.call("index-embed", {})
    lexical = search(archive, "why did the release break? storage was full", semanticPolicy="never")
    with Archive.open(archive.path, settings=settings_for(tmp_path, semantic=False)) as off:
        disabled = search(off, "why did the release break? storage was full", semanticPolicy="always")
    strip = lambda r: orjson.dumps([{k: v for k, v in x.items() if k != "locator"} for x in r["results"]])  # noqa: E731
    assert strip(disabled) == strip(lexical)
    assert disabled["semantic"] is None and lexical["semantic"] is None


def test_semantic_candidates_respect_scope(archive):
    archive.admit(
        {
            "project": "/other",
            "sessionId": "x",
            "kind": "turn",
            "messages": [{"role": "user", "text": "Our release broke because storage was full."}],
        }
    )
    archive.call("index-embed", {})
    response = search(archive, "why did the release break? storage was full", semanticPolicy="always")
    assert all(r["source"]["project"] == PROJECT for r in response["results"])


def test_vectors_of_another_model_are_never_mixed(archive):
    archive.call("index-embed", {})
    archive.conn.execute("UPDATE meta SET value = 'other-model:0' WHERE key = 'embedding_fingerprint'")
    response = search(archive, "why did the release break? storage was full")
    assert response["semantic"]["used"] is False and response["semantic"]["unavailable"] is True
    result = archive.call("index-embed", {})
    assert result["modelChanged"] is True and result["embedded"] == len(CORPUS)
    assert search(archive, "why did the release break? storage was full")["semantic"]["used"] is True


def test_bad_semantic_policy_is_refused(archive):
    with pytest.raises(InvalidRequest):
        search(archive, "x", semanticPolicy="sometimes")


def test_cli_embed_and_models_status(tmp_path):
    db = tmp_path / "archive.db"
    env = hermetic_env(tmp_path, db)
    assert run_cwa(["demo"], env).returncode == 0
    out = run_cwa(["index", "embed", "--json"], env)
    assert out.returncode == 0 and orjson.loads(out.stdout)["pending"] == 0
    shown = run_cwa(["models", "status"], env).stdout.decode()
    assert "all-MiniLM-L6-v2" in shown and "0 window content(s) queued" in shown


def candidate(row: int, mode: str, score: float) -> Candidate:
    return Candidate(mode=mode, document_row=row, match_type=mode, score=score, raw=score, start=0, end=1)


def test_fusion_keeps_each_modes_order_and_credits_both_modes():
    lexical = [candidate(1, "lexical", 0.5), candidate(2, "lexical", 0.6), candidate(3, "lexical", 0.4)]
    assert [c.document_row for c in fuse(lexical)] == [1, 2, 3]  # one mode: its own order stands
    semantic = [candidate(3, "semantic", 0.45), candidate(4, "semantic", 0.9)]
    fused = fuse(lexical, semantic)
    assert fused[0].document_row == 3  # found by both modes: rank credit from each
    assert fused[0].modes == ["lexical", "semantic"]
    assert fused[0].score == 0.45  # presented score: the candidate's own, never the fused order
    assert [c.document_row for c in fused].index(1) < [c.document_row for c in fused].index(2)


def test_locomo_runner_reports_every_mode_and_dropped_ids(tmp_path):
    conversation = {
        "sample_id": "conv-t",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a grey cat named Pixel last week."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Congrats! I started learning the violin."},
            ],
            "session_2_date_time": "10:00 am on 9 June, 2023",
            "session_2": [
                {"speaker": "Ana", "dia_id": "D2:1", "text": "We hiked up the volcano on Saturday."},
                {"speaker": "Ben", "dia_id": "D2:2", "text": "My violin teacher moved to Lisbon."},
            ],
        },
        "qa": [
            {"question": "What is the name of Ana's cat?", "answer": "Pixel", "evidence": ["D1:1"], "category": 4},
            {
                "question": "Where did Ben's violin teacher move?",
                "answer": "Lisbon",
                "evidence": ["D2:2", "D:x"],
                "category": 1,
            },
            {"question": "No evidence here", "answer": "-", "evidence": [], "category": 2},
        ],
    }
    data = tmp_path / "locomo.json"
    data.write_bytes(orjson.dumps([conversation]))
    out = run_cwa(["eval", "locomo", "--data", str(data), "--no-coding-training", "--json"], hermetic_env(tmp_path))
    assert out.returncode == 0, out.stderr
    report = orjson.loads(out.stdout)
    assert set(report["modes"]) == {
        "fts5",
        "fused-lexical",
        "fused-hybrid",
        "neighbors",
        "lexical",
        "auto",
        "hybrid",
    }  # no reranker installed
    for learned in ("lexical", "auto", "hybrid"):  # out of fold, with the training figures beside
        assert report["modes"][learned]["training"]["questions"] == 2
    assert report["preflight"]["questions"] == 2 and report["codingTraining"] is False
    assert "hybrid+rerank" in report["skipped"]
    assert report["droppedEvidenceIds"] == 1 and report["turns"] == 4
    for mode in report["modes"].values():
        assert mode["questions"] == 2
        assert set(mode["overall"]) >= {"R@1", "R@5", "R@10", "hit@5", "hit@10", "nDCG@10"}
        assert mode["overall"]["R@5"] == 1.0  # four turns: every evidence turn is in the top 5
    bad = run_cwa(["eval", "locomo", "--data", str(data), "--modes", "psychic"], hermetic_env(tmp_path))
    assert bad.returncode == EXIT_CODES["invalid-request"]
    for name, body in (
        ("broken.json", b'{"not": "closed"'),
        ("other.json", b'[{"sample_id": "x"}]'),
        ("undated.json", b'[{"sample_id": "x", "conversation": {"session_1": []}, "qa": []}]'),
    ):
        (tmp_path / name).write_bytes(body)
        refused = run_cwa(["eval", "locomo", "--data", str(tmp_path / name), "--json"], hermetic_env(tmp_path))
        assert (
            refused.returncode == EXIT_CODES["invalid-request"]
            and orjson.loads(refused.stdout)["error"]["code"] == "invalid-request"
        )


def test_serve_embeds_queued_windows_in_the_background(tmp_path):
    import subprocess
    import sys
    import time

    db = tmp_path / "archive.db"
    env = hermetic_env(tmp_path, db)
    with Archive.open(db) as archive:
        for user, assistant in CORPUS:
            archive.admit(
                {
                    "project": PROJECT,
                    "sessionId": "s1",
                    "kind": "turn",
                    "messages": [{"role": "user", "text": user}, {"role": "assistant", "text": assistant}],
                }
            )
    child = subprocess.Popen(
        [sys.executable, "-m", "cwa", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    try:
        request = orjson.dumps({"id": 1, "method": "models-status", "params": {}}) + b"\n"
        pending = None
        for _ in range(60):
            child.stdin.write(request)
            child.stdin.flush()
            pending = orjson.loads(child.stdout.readline())["result"]["archive"]["pendingWindows"]
            if pending == 0:
                break
            time.sleep(0.5)
        assert pending == 0
    finally:
        child.stdin.close()
        assert child.wait(timeout=30) == 0


def test_locomo_haystack_grows_each_project_with_distractors_the_floor_sees_too(tmp_path):
    from cwa_eval.retrieval import haystack

    def conversation(sample: str, words: list[str]) -> dict:
        turns = [{"speaker": "Ana", "dia_id": f"D1:{i}", "text": text} for i, text in enumerate(words, 1)]
        return {
            "sample_id": sample,
            "conversation": {"session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": turns},
            "qa": [{"question": f"What about {words[0].split()[-1]}", "evidence": ["D1:1"], "category": 4}],
        }

    conversations = [
        conversation("a", ["I adopted a grey cat named Pixel.", "The hike was long."]),
        conversation("b", ["My violin teacher moved to Lisbon.", "Pixel is also my laptop's name."]),
    ]
    from cwa_eval.retrieval.locomo import dialog_turns

    made = list(haystack.distractors([dialog_turns(c) for c in conversations], 0, ["2023-05-08T13:56:00Z"], 2_000))
    keys = [m["key"] for d in made for m in d["messages"]]
    assert all(k.startswith("x") for k in keys) and len(set(keys)) == len(keys)  # never an evidence id
    assert made[0]["messages"][0]["text"] == "Ana: My violin teacher moved to Lisbon."  # real chat first
    assert {d["createdAt"] for d in made} == {"2023-05-08T13:56:00Z"}  # inside the conversation's span
    assert sum(haystack.tokens_of(m["text"]) for d in made for m in d["messages"]) >= 2_000
    assert any(m["role"] == "toolResult" for d in made for m in d["messages"])  # then coding sessions

    data = tmp_path / "locomo.json"
    data.write_bytes(orjson.dumps(conversations))
    out = run_cwa(
        [
            "eval",
            "locomo",
            "--data",
            str(data),
            "--modes",
            "fts5,lexical",
            "--haystack",
            "3000",
            "--no-coding-training",
            "--json",
        ],
        hermetic_env(tmp_path),
    )
    assert out.returncode == 0, out.stderr
    report = orjson.loads(out.stdout)
    assert report["haystack"]["tokens"] == 3000 and report["haystack"]["projectTokensMin"] >= 3000
    assert report["haystack"]["distractorDocuments"] > 0 and report["turns"] == 4
    assert set(report["modes"]) == {"fts5", "lexical"} and report["modes"]["fts5"]["questions"] == 2


def test_long_history_plants_each_fact_once_and_asks_it_in_other_words(tmp_path):
    from cwa_eval.retrieval.long_history import KINDS, history

    made = history(41, 20_000, 2)
    assert made == history(41, 20_000, 2)  # the same seed, the same history
    assert made.tokens >= 20_000
    texts = {m["key"]: (m["role"], m["text"]) for d in made.documents for m in d["messages"]}
    assert len(texts) == len(made.documents)  # one message per document, keys unique
    assert [f.kind for f in made.facts].count("update") == 2 and {f.kind for f in made.facts} == set(KINDS)
    for fact in made.facts:
        assert fact.evidence and fact.evidence <= set(texts)
        role, text = texts[next(iter(fact.evidence))]
        expected = {"temporal": "toolResult", "fix": "assistant", "value": "assistant"}.get(fact.kind, "user")
        assert role == expected
        assert fact.question not in text  # asked in other words than it was stated
    reversals = [texts[next(iter(f.evidence))][1] for f in made.facts if f.kind == "update"]
    assert all(" to " in text or " with " in text for text in reversals)  # the later choice, not the first
    assert len({d["sessionId"] for d in made.documents}) > 1

    out = run_cwa(
        [
            "eval",
            "long",
            "--tokens",
            "5000",
            "--histories",
            "1",
            "--facts-per-kind",
            "1",
            "--modes",
            "fts5,lexical",
            "--json",
        ],
        hermetic_env(tmp_path),
    )
    assert out.returncode == 0, out.stderr
    report = orjson.loads(out.stdout)["sizes"]["5000"]
    assert report["questions"] == len(KINDS) and set(report["modes"]) == {"fts5", "lexical"}
    assert set(report["modes"]["lexical"]["byKind"]) == set(KINDS)
    for run_name in ("remind", "plain"):
        assert sum(report["preflight"][run_name]["reasons"].values()) == len(KINDS)

    bad = run_cwa(["eval", "long", "--tokens", "12,abc"], hermetic_env(tmp_path))
    assert bad.returncode == 2 and b"--tokens" in bad.stderr and b"Traceback" not in bad.stderr


def test_long_history_inside_plants_each_fact_within_a_long_message_of_its_role():
    from cwa_eval.retrieval.long_history import history

    alone, inside = history(41, 20_000, 2), history(41, 20_000, 2, inside=True)
    assert [f.question for f in inside.facts] == [f.question for f in alone.facts]  # the same facts, asked alike
    texts = [{m["key"]: (m["role"], m["text"]) for d in h.documents for m in d["messages"]} for h in (alone, inside)]
    for fact, planted in zip(alone.facts, inside.facts):
        role, stated = texts[0][next(iter(fact.evidence))]
        inside_role, holder = texts[1][next(iter(planted.evidence))]
        assert inside_role == role
        assert stated in holder and len(holder) >= 2 * len(stated)  # one part of a much longer message
        assert not holder.startswith(stated) and not holder.endswith(stated)  # text before and after it


def _turn(project: str, session: str, text: str) -> dict:
    return {"project": project, "sessionId": session, "kind": "turn", "messages": [{"role": "user", "text": text}]}


def test_a_project_scans_only_its_own_vectors_and_a_crowded_neighbour_cannot_hide_them(archive, monkeypatch):
    from cwa.retrieve import semantic

    query = "why did the release break? storage was full"
    near = [f"Release {n} broke: the storage volume was full again ({n})." for n in range(60)]
    for number, text in enumerate(near):
        archive.admit(_turn("/crowded", f"c{number}", text))
    archive.call("index-embed", {})
    conn = archive.conn
    per_project = dict(
        conn.execute(
            "SELECT p.identity, count(*) FROM window_vector_bits AS b JOIN projects AS p ON p.id = b.project_id GROUP BY p.identity"
        ).fetchall()
    )
    assert per_project == {PROJECT: len(CORPUS), "/crowded": len(near)}
    # A scan of every project's vectors, capped (as sqlite-vec's k was), would return only the
    # crowded project's near copies; the scoped scan reads this project's vectors alone.
    monkeypatch.setattr(semantic, "MAX_K", 16)
    response = search(archive, query, semanticPolicy="always")
    assert response["semantic"]["used"] is True
    assert "disk space" in response["results"][0]["snippet"] and "semantic" in response["results"][0]["modes"]
    crowded = archive.search({"project": "/crowded", "query": query, "limit": 3, "leaseSeconds": 0})
    assert all(r["source"]["project"] == "/crowded" for r in crowded["results"]) and crowded["results"]
    # across every project (where allowed), the scan reads every project's bits
    monkeypatch.setattr(semantic, "MAX_K", 4096)
    env = {"HOME": str(Path(archive.path).parent / "wide"), **DISK_GUARD_OFF}
    user_config_path(env).parent.mkdir(parents=True)
    user_config_path(env).write_text('{"maxReadScope": "all"}')  # only the user's own file widens it
    wide = load_settings(None, env=env)
    with Archive.open(archive.path, settings=wide) as everywhere:
        found = search(everywhere, query, semanticPolicy="always", scope="all", limit=80)
    assert found["semantic"]["used"] is True
    assert {r["source"]["project"] for r in found["results"]} == {PROJECT, "/crowded"}


def test_a_shared_content_is_scanned_in_each_project_and_its_vector_goes_with_its_last_window(archive):
    archive.call("index-embed", {})
    user, assistant = CORPUS[0]
    shared = {"role": "user", "text": user}, {"role": "assistant", "text": assistant}
    archive.admit({**_turn("/second", "s", user), "messages": list(shared)})  # embedded already: new bits only
    conn = archive.conn
    assert conn.execute("SELECT count(*) FROM embedding_queue").fetchone()[0] == 0
    bits = "SELECT count(*) FROM window_vector_bits AS b JOIN projects AS p ON p.id = b.project_id WHERE p.identity = ?"
    assert conn.execute(bits, ("/second",)).fetchone()[0] == 1
    found = archive.search({"project": "/second", "query": "the server had no room left", "semanticPolicy": "always"})
    assert found["semantic"]["used"] is True and "disk space" in found["results"][0]["snippet"]
    # purging the second project's copy: its bits go, the vector and the first project's bits stay
    vectors = conn.execute("SELECT count(*) FROM window_vectors").fetchone()[0]
    asked = archive.call("redact", {"project": "/second", "sessionId": "s"})
    archive.call("redact", {"project": "/second", "sessionId": "s", "confirm": asked["confirm"]})
    archive.call("maintain", {})
    assert conn.execute(bits, ("/second",)).fetchone()[0] == 0
    assert conn.execute(bits, (PROJECT,)).fetchone()[0] == len(CORPUS)
    assert conn.execute("SELECT count(*) FROM window_vectors").fetchone()[0] == vectors
    # forgetting the only document of a vector removes the vector, its bits and nothing else
    lonely = "A completely different remark about the weather in Lisbon."
    archive.admit(_turn(PROJECT, "lonely", lonely))
    archive.call("index-embed", {})
    vectors = conn.execute("SELECT count(*) FROM window_vectors").fetchone()[0]
    asked = archive.call("redact", {"project": PROJECT, "sessionId": "lonely"})
    archive.call("redact", {"project": PROJECT, "sessionId": "lonely", "confirm": asked["confirm"]})
    archive.call("maintain", {})
    assert conn.execute("SELECT count(*) FROM window_vectors").fetchone()[0] == vectors - 1
    orphans = "SELECT count(*) FROM window_vector_bits WHERE embedding_id NOT IN (SELECT id FROM window_vectors)"
    assert conn.execute(orphans).fetchone()[0] == 0


def test_contents_whose_digests_share_their_first_8_bytes_stay_apart(archive):
    """Windows and vectors are found by content through the digest's first 8 bytes (migrations
    0031, 0034); every such seek compares the whole digest too. An embedded content made to share
    the prefix of one not embedded yet: the new one still gets its own vector, each keeps its own
    windows in hybrid search, and forgetting one takes its vector only."""
    conn = archive.conn
    archive.call("index-embed", {})
    lonely = "A completely different remark about the weather in Lisbon."
    archive.admit(_turn(PROJECT, "lonely", lonely))
    window_hash = (
        "SELECT w.content_hash FROM windows AS w JOIN documents AS d ON d.id = w.document_row WHERE d.session_id = ?"
    )
    session_row = "SELECT id FROM sessions WHERE session_key = ?"
    (own,) = conn.execute(window_hash, conn.execute(session_row, ("lonely",)).fetchone()).fetchone()
    (other,) = conn.execute(window_hash, conn.execute(session_row, ("s1",)).fetchone()).fetchone()
    twin = own[:8] + other[8:]  # the first turn's content renamed to share the lonely one's prefix
    conn.execute("UPDATE window_embeddings SET content_hash = ? WHERE content_hash = ?", (twin, other))
    conn.execute("UPDATE windows SET content_hash = ? WHERE content_hash = ?", (twin, other))
    archive.call("index-embed", {})  # the lonely content, whose prefix an embedded content now has

    def ranked(query: str) -> list[tuple[str, float]]:
        # the fused order: each window scored by its own content's similarity, not re-scored
        found = archive.search({"project": PROJECT, "query": query, "semanticPolicy": "always", "ranker": "fused"})
        return [(result["snippet"], result["score"]) for result in found["results"]]

    def top(query: str) -> str:
        return ranked(query)[0][0]

    # the twin took nothing of the lonely content's nearness: the weather alone is that near
    (first, nearest), *others = ranked("what was said about the climate in Portugal's capital")
    assert "Lisbon" in first and others and all(score < nearest for _, score in others)
    assert "disk space" in top("the server had no room left")
    vectors = conn.execute("SELECT count(*) FROM window_vectors").fetchone()[0]
    asked = archive.call("redact", {"project": PROJECT, "sessionId": "lonely"})
    archive.call("redact", {"project": PROJECT, "sessionId": "lonely", "confirm": asked["confirm"]})
    archive.call("maintain", {})
    assert conn.execute("SELECT count(*) FROM window_vectors").fetchone()[0] == vectors - 1
    assert conn.execute("SELECT count(*) FROM window_embeddings WHERE content_hash = ?", (twin,)).fetchone()[0] == 1
    assert "disk space" in top("the server had no room left")


def test_the_shortlist_rescored_gives_exact_cosines_and_nearly_the_exhaustive_order(tmp_path):
    import numpy as np

    from cwa.index import semantic as semantic_index
    from cwa.model_variants import active
    from cwa.retrieve import semantic
    from cwa.retrieve.context import make_context
    from cwa.retrieve.scope import resolve_scope
    from cwa.store.reads import window_text
    from cwa.store.sqlfiles import queries as named_queries
    from cwa.store.vector_format import quantized

    subjects = ["the upload service", "the billing job", "our login page", "the search index", "the mobile app"]
    events = ["crashed on start", "ran out of memory", "timed out", "returned stale data", "lost a config file"]
    causes = ["after the deploy", "under heavy load", "on Mondays", "when the cache expired", "after a schema change"]
    texts = [f"{s} {e} {c}." for s in subjects for e in events for c in causes]  # 125 distinct sentences
    with Archive.open(tmp_path / "a.db", settings=settings_for(tmp_path)) as opened:
        for number, text in enumerate(texts):
            opened.admit(_turn(PROJECT, f"s{number}", text))
        opened.call("index-embed", {})
        conn = opened.conn
        rows = conn.execute(
            "SELECT v.id, v.embedding, e.content_hash FROM window_vectors AS v"
            " JOIN window_embeddings AS e ON e.id = v.id ORDER BY v.id"
        ).fetchall()
        ids = [row for row, _, _ in rows]
        stored = np.stack([np.frombuffer(b, dtype="i1").astype("<f4") for _, b, _ in rows])
        stored /= np.linalg.norm(stored, axis=1, keepdims=True)  # int8, each scaled to ±127
        sql = named_queries("semantic")
        window_texts = [window_text(conn, *conn.execute(sql["window_for_content"], (h,)).fetchone()) for *_, h in rows]
        matrix = embedder(active(None)).embed(window_texts)  # the float32 vectors the int8 ones stand for
        queries = ["the app fell over when memory ran short", "a deploy broke the login", "stale results from search"]
        scope = resolve_scope(conn, "project", PROJECT, None, "all")
        context = make_context(conn, scope, [], "2026-12-01T00:00:00.000Z", None)
        overlaps = []
        for query in queries:
            embedded = semantic.query_vector(context, query)
            assert embedded is not None
            vector = embedded.vector
            k = 5  # shortlist 80 of 125: the sign bits choose
            found = semantic_index.nearest_contents(conn, scope.project_row, vector, k)
            asked = np.frombuffer(quantized(vector), dtype="i1").astype("<f4")
            rescored = 1.0 - stored @ (asked / np.linalg.norm(asked))
            exact = 1.0 - matrix @ vector.astype("<f4")
            for content, distance in found:  # the int8 cosine, within rounding of the float32 one
                assert distance == pytest.approx(rescored[ids.index(content)], abs=1e-5)
                assert distance == pytest.approx(exact[ids.index(content)], abs=0.01)
            assert [d for _, d in found] == sorted(d for _, d in found)
            best = {ids[i] for i in np.argsort(exact)[:k]}
            overlaps.append(len(best & {c for c, _ in found}) / k)
        assert sum(overlaps) / len(overlaps) >= 0.9


def test_the_block_scan_keeps_every_vector_tied_with_the_nearest_it_has_seen(tmp_path):
    # Sign bits made so the query's Hamming distance to vector i is known: the query is all
    # positive (every bit set), and a vector with n bits cleared is n away. The first blocks
    # fill the shortlist with vectors 1 away; a later block holds more vectors 1 away with smaller
    # ids, which the nearest by (distance, id) must include.
    from cwa.store import vector_blocks
    from cwa.store.connection import open_connection

    conn = open_connection(tmp_path / "a.db")
    width = vector_blocks.BITS_WIDTH

    def bits(cleared: int) -> bytes:
        return bytes([0x00] * (cleared // 8) + [0xFF >> (cleared % 8)] * (cleared % 8 > 0)).ljust(width, b"\xff")

    blocks = [  # (ids, distances): ids 1000+ at distance 1 first, then ids 1-40 at 1 and 2
        (range(1000, 1064), [1] * 64),
        (range(2000, 2064), [3] * 64),
        (range(1, 41), [1, 2] * 20),
    ]
    with conn:
        conn.execute("INSERT INTO projects (id, identity, created_at) VALUES (1, '/p', '2026-12-01T00:00:00.000Z')")
        for ids, distances in blocks:
            conn.execute(
                "INSERT INTO window_vector_blocks (project_id, ids, bits) VALUES (1, ?, ?)",
                (np.array(list(ids), dtype="<i8").tobytes(), b"".join(bits(d) for d in distances)),
            )
    query = np.ones(vector_blocks.DIMENSIONS, dtype="<f4").tobytes()
    for size in (5, 16, 30):
        expected = sorted([(1, i) for i in range(1, 41, 2)] + [(1, i) for i in range(1000, 1064)])[:size]
        assert vector_blocks.shortlist(conn, 1, query, size) == [i for _, i in expected]
    conn.close()


def test_packed_sign_bits_give_the_row_scans_shortlist_and_never_a_vector_the_project_lost(tmp_path, monkeypatch):
    from cwa.index import semantic as semantic_index
    from cwa.retrieve import semantic
    from cwa.retrieve.context import make_context
    from cwa.retrieve.scope import resolve_scope
    from cwa.store import vector_blocks

    subjects = ["the upload service", "the billing job", "our login page", "the search index", "the mobile app"]
    events = ["crashed on start", "ran out of memory", "timed out", "returned stale data", "lost a config file"]
    causes = ["after the deploy", "under heavy load", "on Mondays", "when the cache expired", "after a schema change"]
    texts = [f"{s} {e} {c}." for s in subjects for e in events for c in causes]  # 125 distinct sentences
    queries = ["the app fell over when memory ran short", "a deploy broke the login", "stale results from search"]
    with Archive.open(tmp_path / "a.db", settings=settings_for(tmp_path)) as opened:
        for number, text in enumerate(texts):
            opened.admit(_turn(PROJECT, f"s{number}", text))
        opened.admit(_turn("/other", "o", texts[0]))  # a content two projects hold
        conn = opened.conn
        opened.call("index-embed", {})  # 126 vectors: no whole block of 4,096, nothing packed
        monkeypatch.setattr(vector_blocks, "BLOCK_VECTORS", 32)
        scope = resolve_scope(conn, "project", PROJECT, None, "all")
        context = make_context(conn, scope, [], "2026-12-01T00:00:00.000Z", None)
        vectors = [semantic.query_vector(context, q).vector for q in queries]
        row_scan = [semantic_index.nearest_contents(conn, scope.project_row, v, 8) for v in vectors]  # shortlist: all
        everywhere = [semantic_index.nearest_contents(conn, None, v, 8) for v in vectors]
        assert vector_blocks.shortlist(conn, scope.project_row, vectors[0].astype("<f4").tobytes(), 48) is None

        bits = dict(
            conn.execute("SELECT embedding_id, bits FROM window_vector_bits WHERE project_id = ?", (scope.project_row,))
        )
        assert vector_blocks.pack(conn) == 96  # three whole blocks; 29 stay rows; /other has one
        assert conn.execute("SELECT count(*) FROM window_vector_blocks").fetchone()[0] == 3
        unpacked = "SELECT project_id, count(*) FROM window_vector_bits WHERE packed = 0 GROUP BY project_id"
        assert sorted(n for _, n in conn.execute(unpacked)) == [1, 29]
        moved = "SELECT count(*) FROM window_vector_bits WHERE packed = 1 AND bits = x''"
        assert conn.execute(moved).fetchone()[0] == 96  # the bits are kept once, in the blocks
        for vector in vectors:
            query_bits = conn.execute("SELECT vec_quantize_binary(?)", (vector.astype("<f4").tobytes(),)).fetchone()[0]

            def hamming(i, q=query_bits):
                return bin(int.from_bytes(bits[i], "little") ^ int.from_bytes(q, "little")).count("1")

            for size in (5, 31, 48):  # under a block (32 here), each block is cut to its nearest first
                expected = sorted(bits, key=lambda i: (hamming(i), i))[:size]
                assert (
                    vector_blocks.shortlist(conn, scope.project_row, vector.astype("<f4").tobytes(), size) == expected
                )
                # every project's: /other's one content is this project's too, counted once
                assert vector_blocks.shortlist(conn, None, vector.astype("<f4").tobytes(), size) == expected
        assert [semantic_index.nearest_contents(conn, scope.project_row, v, 8) for v in vectors] == row_scan
        assert [semantic_index.nearest_contents(conn, None, v, 8) for v in vectors] == everywhere

        # the session holding the content /other shares forgotten here: the vector stays (/other
        # holds it), its bits leave this project's rows but stay in this project's block
        mine = semantic.query_vector(context, texts[0]).vector
        first = semantic_index.nearest_contents(conn, scope.project_row, mine, 1)[0][0]
        session = "s0"
        asked = opened.call("redact", {"project": PROJECT, "sessionId": session})
        opened.call("redact", {"project": PROJECT, "sessionId": session, "confirm": asked["confirm"]})
        opened.call("maintain", {})
        still = "SELECT count(*) FROM window_vector_bits WHERE project_id = ? AND embedding_id = ?"
        assert conn.execute(still, (scope.project_row, first)).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM window_vectors WHERE id = ?", (first,)).fetchone()[0] == 1
        assert vector_blocks.shortlist(conn, scope.project_row, mine.astype("<f4").tobytes(), 8)[0] == first
        assert all(content != first for content, _ in semantic_index.nearest_contents(conn, scope.project_row, mine, 8))
        other = resolve_scope(conn, "project", "/other", None, "all")
        assert semantic_index.nearest_contents(conn, other.project_row, mine, 8)[0][0] == first
        # a packed content admitted in a new project: its bits come from the stored vector's signs
        opened.admit(_turn("/third", "t", texts[1]))
        third = resolve_scope(conn, "project", "/third", None, "all")
        (row_bits,) = conn.execute("SELECT bits FROM window_vector_bits WHERE project_id = ?", (third.project_row,))
        assert len(row_bits[0]) == vector_blocks.BITS_WIDTH
        near = semantic.query_vector(context, texts[1]).vector
        assert (
            semantic_index.nearest_contents(conn, third.project_row, near, 1)[0][0]
            == (semantic_index.nearest_contents(conn, scope.project_row, near, 1)[0][0])
        )


def test_packing_leaves_the_sign_bit_rows_in_full_pages(tmp_path, monkeypatch):
    # A packed row keeps only which project holds which vector; written again rather than shrunk
    # in place, its pages stay full (shrunk in place, 64-byte rows left them three quarters empty).
    from cwa.store import vector_blocks

    monkeypatch.setattr(vector_blocks, "BLOCK_VECTORS", 1000)
    monkeypatch.setattr(vector_blocks, "YIELD_SECONDS", 0.0)
    pages = "SELECT sum(pgsize) FROM dbstat WHERE name = 'window_vector_bits'"
    with Archive.open(tmp_path / "a.db", settings=settings_for(tmp_path)) as opened:
        opened.admit(_turn(PROJECT, "s", "the upload service crashed on start."))
        conn = opened.conn
        project = conn.execute("SELECT id FROM projects WHERE identity = ?", (PROJECT,)).fetchone()[0]
        ids = range(1000, 7500)
        with conn:
            embedded = [(n, n.to_bytes(32, "big"), "2026-12-01T00:00:00.000Z") for n in ids]
            conn.executemany("INSERT INTO window_embeddings (id, content_hash, embedded_at) VALUES (?, ?, ?)", embedded)
            bits = [(project, n, bytes([n % 251]) * vector_blocks.BITS_WIDTH) for n in ids]
            conn.executemany("INSERT INTO window_vector_bits (project_id, embedding_id, bits) VALUES (?, ?, ?)", bits)
        unpacked = conn.execute(pages).fetchone()[0]
        assert vector_blocks.pack(conn) == 6000
        rows = "SELECT packed, count(*), sum(length(bits)) FROM window_vector_bits WHERE project_id = ? GROUP BY 1"
        assert conn.execute(rows, (project,)).fetchall() == [(0, 500, 500 * vector_blocks.BITS_WIDTH), (1, 6000, 0)]
        assert conn.execute(pages).fetchone()[0] * 3 <= unpacked


def test_serve_s_embedding_worker_packs_on_its_first_step_and_then_only_after_embedding(archive, monkeypatch):
    from cwa.index.semantic import BackgroundEmbedder
    from cwa.store import vector_blocks

    archive.call("index-embed", {})  # five vectors: no whole block of 4,096
    monkeypatch.setattr(vector_blocks, "BLOCK_VECTORS", 2)
    worker = BackgroundEmbedder(str(archive.path), lambda: "2026-12-01T00:00:00.000Z")
    blocks = "SELECT count(*) FROM window_vector_blocks"
    worker.step(archive.conn)  # an archive from before blocks: its first step packs what it holds
    assert archive.conn.execute(blocks).fetchone()[0] == 2 and worker.pack_due is False
    calls = []
    monkeypatch.setattr(vector_blocks, "pack", lambda *args, **kwargs: calls.append(1) or 0)
    worker.step(archive.conn)  # nothing embedded since: the unpacked rows are not scanned again
    assert calls == []
    archive.admit(_turn(PROJECT, "later", "A new remark about the backup window on Sundays."))
    worker.step(archive.conn)  # embeds it, so the next step looks for a whole block again
    assert worker.pack_due is True
    worker.step(archive.conn)
    assert calls == [1]


def test_the_packed_shortlist_counts_a_content_held_twice_once_before_cutting_the_nearest():
    # A content two projects hold has one id in two places, always at one distance: it must not
    # take the place of the next nearest (an every-project shortlist of 31 once held 30 ids).
    import numpy as np

    from cwa.store.vector_blocks import _nearest_distinct

    ids = np.array([7, 3, 7, 5, 9, 4], dtype=np.int64)
    distance = np.array([1, 2, 1, 3, 9, 4], dtype=np.int32)
    kept, at = _nearest_distinct(ids, distance, 3)
    assert sorted(kept.tolist()) == [3, 5, 7] and sorted(at.tolist()) == [1, 2, 3]
    kept, _ = _nearest_distinct(np.array([2, 1], dtype=np.int64), np.array([5, 6], dtype=np.int32), 3)
    assert sorted(kept.tolist()) == [1, 2]  # fewer than asked: all of them


def test_a_long_window_is_as_near_a_query_as_its_nearest_piece(archive):
    # the backup's failure opens the text: its first piece is near the question, its second (all
    # garden) is not, and the window must count as the first, wherever its rows come in the scan
    archive.admit(_turn(PROJECT, "long", BACKUP + " " + GARDEN))
    archive.call("index-embed", {})
    no_shared_word = "why didn't the copy finish? storage had no room left"
    fused = search(archive, no_shared_word, semanticPolicy="always", ranker="fused")["results"][0]
    assert fused["modes"] == ["semantic"] and BACKUP[:40] in fused["snippet"] and fused["rawScore"] > 0.15
    learned = search(archive, BACKUP_QUERY, semanticPolicy="always", explain=True)
    features = learned["ranking"]["features"]
    held = next(c for c in learned["ranking"]["pool"] if c["documentId"] == learned["results"][0]["documentId"])
    assert BACKUP[:40] in learned["results"][0]["snippet"] and held["features"][features.index("cosine")] > 0.15


def test_vectors_cut_at_256_tokens_are_kept_and_long_windows_get_their_other_pieces(archive):
    from cwa.index import semantic
    from cwa.model_variants import active

    archive.admit(_turn(PROJECT, "long", GARDEN + " " + BACKUP))
    archive.call("index-embed", {})
    conn = archive.conn
    files = active(archive.path)
    pieces = "SELECT content_hash, piece, id FROM window_embeddings ORDER BY content_hash, piece"
    texts = {
        h: semantic.window_text(conn, *row)
        for h, *row in conn.execute(
            "SELECT content_hash, document_row, start_byte, end_byte, first_message, last_message FROM windows"
        )
    }
    fits = {h: count == 1 for h, count in zip(texts, embedder(files).piece_counts(list(texts.values())))}
    longer = {h for h, fit in fits.items() if not fit}
    assert len(fits) - len(longer) == len(CORPUS) and longer  # the long turn's windows are longer than a piece
    full = conn.execute(pieces).fetchall()
    assert {h for h, piece, _ in full if piece} == longer
    _as_if_cut_at_the_first_piece(conn, files)
    first = conn.execute(pieces).fetchall()
    assert search(archive, BACKUP_QUERY, semanticPolicy="always")["semantic"]["used"] is True  # until it adopts
    result = archive.call("index-embed", {})
    assert result["modelChanged"] is False and result["embedded"] == 0
    assert result["refreshed"] == len(longer) and result["refreshing"] == 0
    assert archive.call("models-status", {})["archive"]["fingerprint"] == files.fingerprint
    after = conn.execute(pieces).fetchall()
    assert [row for row in after if row[1] == 0] == first  # every first piece kept, ids and all
    assert [(h, piece) for h, piece, _ in after] == [(h, piece) for h, piece, _ in full]
    assert archive.call("index-embed", {})["refreshed"] == 0
    found = search(archive, BACKUP_QUERY, semanticPolicy="always")
    assert found["semantic"]["used"] is True and "backup failed" in found["results"][0]["snippet"]
    # `cwa serve`'s embedder does the same after its queue
    _as_if_cut_at_the_first_piece(conn, files)
    assert semantic.BackgroundEmbedder(str(archive.path), lambda: "2026-12-04T00:00:00.000Z").step(conn) is True
    assert [(h, piece) for h, piece, _ in conn.execute(pieces)] == [(h, piece) for h, piece, _ in full]
    assert semantic.refreshing(conn) == 0
    # a content forgotten while it waits leaves nothing waiting
    conn.execute("UPDATE meta SET value = ? WHERE key = 'embedding_fingerprint'", (files.earlier_fingerprint,))
    semantic.adopt(conn, files.fingerprint, "2026-12-04T00:00:00.000Z", files.earlier_fingerprint)
    assert archive.call("models-status", {})["archive"]["refreshWindows"] == len(longer)
    asked = archive.call("redact", {"project": PROJECT, "sessionId": "long"})
    archive.call("redact", {"project": PROJECT, "sessionId": "long", "confirm": asked["confirm"]})
    archive.call("maintain", {})
    assert archive.call("models-status", {})["archive"]["refreshWindows"] == 0
    assert conn.execute("SELECT count(*) FROM window_embeddings").fetchone()[0] == len(CORPUS)


def _as_if_cut_at_the_first_piece(conn, files) -> None:
    """The archive as a cwa that embedded each text's first 256 tokens left it: first pieces only,
    under that recipe's fingerprint."""
    later = conn.execute("SELECT id FROM window_embeddings WHERE piece > 0").fetchall()
    for (embedding_id,) in later:
        conn.execute("DELETE FROM window_vector_bits WHERE embedding_id = ?", (embedding_id,))
        conn.execute("DELETE FROM window_vectors WHERE id = ?", (embedding_id,))
        conn.execute("DELETE FROM window_embeddings WHERE id = ?", (embedding_id,))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'embedding_fingerprint'", (files.earlier_fingerprint,))


def test_a_document_holding_an_embedded_content_and_a_new_one_gets_the_first_scanned_and_the_second_queued(archive):
    """Admission skips the look for sign bits only when every window's content was just queued;
    one window already embedded (another project's) and one new: both are looked after."""
    archive.call("index-embed", {})
    user, assistant = CORPUS[0]
    long_tail = " ".join(f"word{n}" for n in range(260))  # a window of its own
    messages = [{"role": "user", "text": user}, {"role": "assistant", "text": assistant}]
    archive.admit({**_turn("/mixed", "m", user), "messages": [*messages, {"role": "user", "text": long_tail}]})
    conn = archive.conn
    windows = "SELECT count(*) FROM windows AS w JOIN documents AS d ON d.id = w.document_row WHERE d.session_id = (SELECT id FROM sessions WHERE session_key = 'm')"
    assert conn.execute(windows).fetchone()[0] >= 2
    bits = "SELECT count(*) FROM window_vector_bits AS b JOIN projects AS p ON p.id = b.project_id WHERE p.identity = ?"
    assert conn.execute(bits, ("/mixed",)).fetchone()[0] == 1  # the shared content, scanned here too
    assert conn.execute("SELECT count(*) FROM embedding_queue").fetchone()[0] >= 1  # the new ones wait


CHAT_TOPICS = [
    ("I finally planted tomatoes and basil in the backyard beds this weekend.", "What vegetables did Melanie grow?"),
    ("My sister and I watched a documentary about deep sea creatures.", "What did Melanie watch with her sister?"),
    ("I adopted a rescue puppy named Biscuit, she loves long walks.", "What pet did Melanie get?"),
    ("I started learning the violin, my fingers hurt after practice.", "Which instrument is Melanie learning?"),
    ("I signed up for a half marathon in the spring.", "Which race is Melanie training for?"),
    ("Our book club is reading a mystery novel set in Venice.", "What is Melanie's book club reading?"),
    ("I have been volunteering at the animal shelter on Saturdays.", "Where does Melanie volunteer?"),
    ("I fixed the leaking faucet in the bathroom myself.", "What did Melanie fix at home?"),
    ("We are planning a trip to Japan to see the cherry blossoms.", "Where is Melanie travelling to see flowers?"),
]
CHAT_REPLIES = [
    "Melanie, that is wonderful news!",
    "Wow Melanie, good for you!",
    "Melanie, you always surprise me.",
    "Thanks for telling me, Melanie!",
    "Melanie, I am so happy for you.",
]


def _chat_context(opened, project):
    from cwa.retrieve.context import make_context
    from cwa.retrieve.scope import resolve_scope

    scope = resolve_scope(opened.conn, "project", project, None, "all")
    return make_context(opened.conn, scope, [], "2026-12-01T00:00:00.000Z", None)


def test_the_query_is_embedded_without_the_words_most_of_its_scope_holds(tmp_path):
    # A chat whose every turn names Melanie: asked about her by name, the name would weigh in
    # the query's embedding as much as the words that tell her turns apart. Scoped: another
    # project's windows do not count, nor does a scope too small to say.
    from cwa.retrieve.semantic import COMMON_MIN_WINDOWS, embedded_query

    with Archive.open(tmp_path / "a.db", settings=settings_for(tmp_path)) as opened:
        for number, (text, _) in enumerate(CHAT_TOPICS * 2):  # 36 distinct turns (a day each pair)
            opened.admit(_turn("/chat", "s1", f"Melanie: {text} Day {number}."))
            opened.admit(_turn("/chat", "s1", f"Caroline: {CHAT_REPLIES[number % len(CHAT_REPLIES)]} Day {number}."))
            opened.admit(_turn("/other", f"o{number}", f"Melanie and Caroline met for lunch ({number})."))
        for number in range(COMMON_MIN_WINDOWS - 1):
            opened.admit(_turn("/small", "s1", f"Melanie: a note {number}"))
        chat = _chat_context(opened, "/chat")
        assert embedded_query(chat, "What pet did Melanie get?") == "What pet did get?"
        assert embedded_query(chat, "Did Caroline's puppy meet Melanie's?") == "Did Caroline's puppy meet"
        assert embedded_query(chat, "Melanie?") == "Melanie?"  # nothing would be left
        assert embedded_query(_chat_context(opened, "/small"), "What did Melanie note?") == "What did Melanie note?"
        # Caroline is in half the chat's windows, not more; /other's 18 windows that name her too
        # are not the chat's
        assert embedded_query(chat, "Caroline's lunch") == "Caroline's lunch"


def _chat_in_a_long_project(opened, project: str) -> None:
    """Melanie's 36-turn chat (session s1, every turn naming her) between 60 one-window sessions
    before it and 60 after, so that she is in fewer than half of the project's windows."""
    for number in range(60):
        opened.admit(_turn(project, f"o{number}", f"The deploy script retried upload {number} twice."))
    for number, (text, _) in enumerate(CHAT_TOPICS * 2):
        opened.admit(_turn(project, "s1", f"Melanie: {text} Day {number}."))
        opened.admit(_turn(project, "s1", f"Caroline: {CHAT_REPLIES[number % len(CHAT_REPLIES)]} Day {number}."))
    for number in range(60, 120):
        opened.admit(_turn(project, f"o{number}", f"The deploy script retried upload {number} twice."))


def test_the_query_is_embedded_without_the_words_most_windows_around_its_best_candidates_hold(tmp_path):
    # The same chat inside a longer project: Melanie is in every turn of the chat's session but
    # in fewer than half of the project's windows. Around lexical search's best candidates (the
    # chat's turns) the name tells nothing apart, so it is left out there; around candidates
    # whose sessions are too small to say, or without candidates, it stays.
    from cwa.retrieve.semantic import embedded_query

    with Archive.open(tmp_path / "a.db", settings=settings_for(tmp_path)) as opened:
        _chat_in_a_long_project(opened, "/long")
        conn = opened.conn
        spans = conn.execute(
            "SELECT s.session_key, w.id, d.session_id FROM windows AS w JOIN documents AS d ON d.id = w.document_row"
            " JOIN sessions AS s ON s.id = d.session_id ORDER BY w.id"
        ).fetchall()
        chat = [(window, session) for key, window, session in spans if key == "s1"]
        others = [(window, session) for key, window, session in spans if key != "s1"]
        assert len(chat) == 36 and len(others) == 120  # Melanie in 36 of 156 windows: kept by the scope's count
        long = _chat_context(opened, "/long")
        question = "What pet did Melanie get?"
        assert embedded_query(long, question) == question
        assert embedded_query(long, question, [chat[20], others[0]]) == "What pet did get?"
        assert embedded_query(long, question, [others[0], chat[0], chat[1]]) == "What pet did get?"
        # one window a session: three candidates' sessions hold 3 windows, fewer than
        # COMMON_MIN_WINDOWS, too few to say
        assert embedded_query(long, question, others[:3]) == question
        # around the chat's first turn only windows of its own session count: the 120 sessions
        # within reach of the span either side do not dilute the name's share
        assert embedded_query(long, question, [chat[0]]) == "What pet did get?"
        assert embedded_query(long, "Melanie?", [chat[20]]) == "Melanie?"  # nothing would be left


def test_hybrid_search_embeds_the_query_without_the_name_its_best_lexical_candidates_all_hold(tmp_path):
    # The wiring: search hands its lexical candidates to the embedding step, and `explain` shows
    # the text the model read (the real model; Melanie's chat inside a longer project).
    with Archive.open(tmp_path / "a.db", settings=settings_for(tmp_path)) as opened:
        _chat_in_a_long_project(opened, "/long")
        opened.call("index-embed", {})
        request = {"project": "/long", "query": "What pet did Melanie get?", "semanticPolicy": "always"}
        explained = opened.call("search", {**request, "explain": True})
        assert explained["semantic"]["used"] is True
        assert explained["semantic"]["embeddedQuery"] == "What pet did get?"
        assert "embeddedQuery" not in opened.call("search", request)["semantic"]


def test_semantic_candidates_of_a_chat_are_the_turns_on_the_topic_not_the_ones_naming_its_speaker(tmp_path):
    from cwa.index.terms import terms
    from cwa.retrieve import semantic

    with Archive.open(tmp_path / "a.db", settings=settings_for(tmp_path)) as opened:
        topical = {}
        for number, (text, question) in enumerate(CHAT_TOPICS):
            topical[question] = f"Melanie: {text}"
            opened.admit(_turn("/chat", "s1", topical[question]))
            opened.admit(_turn("/chat", "s1", f"Caroline: {CHAT_REPLIES[number % len(CHAT_REPLIES)]} ({number})"))
        for greeting in ("Melanie: Good morning!", "Melanie: Talk soon, bye!"):  # 20 windows: enough to count
            opened.admit(_turn("/chat", "s1", greeting))
        opened.call("index-embed", {})
        context = _chat_context(opened, "/chat")
        for question, turn in topical.items():
            vector = semantic.query_vector(context, question).vector
            nearest = semantic.semantic_candidates(context, vector, terms(question), 1, set())
            assert nearest[0].text == turn, question
