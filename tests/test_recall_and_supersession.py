"""Signed locators, leases, recall materialization and explicit supersession."""

from __future__ import annotations

import apsw
import pytest

from cwa.api import Archive
from cwa.errors import Conflict
from cwa.tokens import estimate_tokens

P = "/work/app"


class Clock:
    def __init__(self, now: str) -> None:
        self.now = now

    def __call__(self) -> str:
        return self.now


def turn(session, text, at, **extra):
    return {
        "project": P,
        "sessionId": session,
        "kind": "turn",
        "createdAt": at,
        "messages": [{"role": "user", "text": text}, {"role": "assistant", "text": "noted: " + text}],
        **extra,
    }


@pytest.fixture
def clock():
    return Clock("2026-11-10T00:00:00.000Z")


def test_correction_returns_only_the_replacement_and_old_locators_say_superseded(db_path, clock):
    with Archive.open(db_path, clock=clock) as archive:
        old = archive.admit(
            turn("s", "deploy target is the blue cluster", "2026-11-01T00:00:00Z", subjectKey="deploy-target")
        )
        before = archive.search({"project": P, "query": "deploy target cluster"})["results"]
        assert before[0]["documentId"] == old["documentId"]
        old_locator = before[0]["locator"]

        new = archive.admit(
            turn(
                "s",
                "deploy target is the green cluster",
                "2026-11-02T00:00:00Z",
                subjectKey="deploy-target",
                supersedes={"documentId": old["documentId"], "version": 1},
            )
        )
        after = archive.search({"project": P, "query": "deploy target cluster", "limit": 10})["results"]
        assert [(r["documentId"], r["version"]) for r in after] == [(new["documentId"], new["version"])]
        assert "green" in after[0]["snippet"]
        for exact_query in ('"blue cluster"', "deploy-target"):
            hits = archive.search({"project": P, "query": exact_query})["results"]
            assert all(r["version"] == new["version"] for r in hits)

        recalled = archive.recall({"locator": old_locator, "project": P})
        assert recalled["status"] == "superseded"
        assert "text" not in recalled
        assert recalled["replacement"] == {"documentId": new["documentId"], "version": 2}
        current = archive.recall({"locator": after[0]["locator"], "project": P})
        assert current["status"] == "resolved" and "green" in current["text"] and "blue" not in current["text"]


def test_tampered_foreign_and_out_of_scope_locators_yield_no_bytes(db_path, clock):
    with Archive.open(db_path, clock=clock) as archive:
        archive.admit(turn("s1", "the api token rotates nightly", "2026-11-01T00:00:00Z"))
        hit = archive.search({"project": P, "query": "api token rotates", "scope": "session", "sessionId": "s1"})[
            "results"
        ][0]
        locator = hit["locator"]
        head, payload, signature = locator.split(".")
        tampered_payload = payload[:-2] + ("A" if payload[-2] != "A" else "B") + payload[-1]
        for bad in (
            f"{head}.{tampered_payload}.{signature}",
            f"{head}.{payload}.{signature[::-1]}",
            "cwa1.x.y",
            "nonsense",
        ):
            result = archive.recall({"locator": bad, "project": P})
            assert result["status"] == "locator-invalid" and "text" not in result
        foreign = archive.recall({"locator": locator, "project": "/some/other/project"})
        assert foreign == {"status": "locator-invalid", "reason": "other-project"}
        out_of_scope = archive.recall({"locator": locator, "project": P, "sessionIds": ["s2"]})
        assert out_of_scope["status"] == "locator-invalid" and "text" not in out_of_scope
        assert archive.recall({"locator": locator, "project": P, "sessionIds": ["s1"]})["status"] == "resolved"


def test_locator_from_another_archive_is_invalid(tmp_path, clock):
    with Archive.open(tmp_path / "a.db", clock=clock) as first:
        first.admit(turn("s", "shared words here", "2026-11-01T00:00:00Z"))
        locator = first.search({"project": P, "query": "shared words"})["results"][0]["locator"]
    with Archive.open(tmp_path / "b.db", clock=clock) as second:
        second.admit(turn("s", "shared words here", "2026-11-01T00:00:00Z"))
        assert second.recall({"locator": locator, "project": P})["status"] == "locator-invalid"


def test_lease_expiry(db_path, clock):
    with Archive.open(db_path, clock=clock) as archive:
        archive.admit(turn("s", "the nightly backup job", "2026-11-01T00:00:00Z"))
        response = archive.search({"project": P, "query": "nightly backup"})
        assert response["lease"]["expiresAt"] == "2026-11-10T00:05:00.000Z"
        rows = archive.conn.execute("SELECT count(*) FROM lease_documents").fetchone()[0]
        assert rows == 1
        locator = response["results"][0]["locator"]
        clock.now = "2026-11-10T00:04:59.000Z"
        assert archive.recall({"locator": locator, "project": P})["status"] == "resolved"
        clock.now = "2026-11-10T00:05:01.000Z"
        assert archive.recall({"locator": locator, "project": P})["status"] == "lease-expired"
        document_id = response["results"][0]["documentId"]
        assert archive.recall({"documentId": document_id, "project": P})["status"] == "resolved"


def test_recall_of_a_5_mib_tool_output_reads_only_intersecting_chunks(db_path, clock):
    lines = [f"{n:07d} worker-{n % 13} processed batch {n} in {n % 97} ms ✓ ok\n" for n in range(100_000)]
    lines[61_234] = "0061234 FATAL ERR_DISK_QUOTA_EXCEEDED while writing /var/data/shard-17.parquet\n"
    text = "".join(lines)
    with Archive.open(db_path, clock=clock) as archive:
        admitted = archive.admit(
            {
                "project": P,
                "sessionId": "s",
                "kind": "tool-result",
                "createdAt": "2026-11-01T00:00:00Z",
                "messages": [{"role": "toolResult", "toolName": "bash", "text": text}],
            }
        )
        size = archive.get({"documentId": admitted["documentId"], "range": {"start": 0, "end": 0}})["byteLength"]
        assert size > 5 * 1024 * 1024
        hit = archive.search({"project": P, "query": "ERR_DISK_QUOTA_EXCEEDED"})["results"][0]
        assert hit["matchType"] == "exact-error"
        lexical = archive.search({"project": P, "query": "fatal disk quota shard parquet"})["results"][0]
        assert lexical["matchType"] == "bm25"
        doc_row = archive.conn.execute(
            "SELECT id FROM documents WHERE document_id = ?", (admitted["documentId"],)
        ).fetchone()[0]
        total_chunks = archive.conn.execute(
            "SELECT count(*) FROM document_chunks WHERE document_row = ?", (doc_row,)
        ).fetchone()[0]

    start, end = lexical["range"]["start"], lexical["range"]["end"]
    raw = apsw.Connection(str(db_path))
    keep = {
        r[0]
        for r in raw.execute(
            "SELECT chunk_id FROM document_chunks WHERE document_row = ? "
            "AND ((end_byte > ? AND start_byte < ?) OR start_byte = 0)",  # the hit's area, and the header
            (doc_row, start - 20_000, end + 20_000),
        )
    }
    # Destroy every other chunk: reading one would produce garbage.
    raw.execute(f"UPDATE chunks SET data = zeroblob(byte_length) WHERE id NOT IN ({','.join(map(str, keep))})")
    raw.close()

    with Archive.open(db_path, clock=clock) as archive:
        recalled = archive.recall({"locator": lexical["locator"], "project": P, "neighbors": 1, "maxTokens": 2000})
    assert recalled["status"] == "resolved"
    assert "ERR_DISK_QUOTA_EXCEEDED" in recalled["text"]
    assert recalled["chunksRead"] <= 4 < total_chunks  # header, the window and its neighbours
    assert all(
        c["end"] > recalled["range"]["start"] and c["start"] < recalled["range"]["end"] for c in recalled["chunks"]
    )
    assert recalled["tokens"] <= 2000 and estimate_tokens(recalled["header"] + recalled["text"]) <= 2000
    assert recalled["header"].startswith("[toolResult tool=bash]")
    assert set(recalled["continuation"]) == {"before", "after"}
    assert recalled["sourceKeys"] == admitted["messageKeys"]


def test_continuation_locators_walk_the_source_exactly(db_path, clock):
    text = "".join(f"step {n}: compile module_{n} and link it\n" for n in range(3000))
    with Archive.open(db_path, clock=clock) as archive:
        admitted = archive.admit(
            {
                "project": P,
                "sessionId": "s",
                "kind": "tool-result",
                "createdAt": "2026-11-01T00:00:00Z",
                "messages": [{"role": "toolResult", "text": text}],
            }
        )
        full = archive.get({"documentId": admitted["documentId"]})["text"].encode()
        hit = archive.search({"project": P, "query": "module_1500"})["results"][0]
        piece = archive.recall({"locator": hit["locator"], "project": P, "maxTokens": 300, "neighbors": 0})
        assert piece["tokens"] <= 300
        assert full[piece["range"]["start"] : piece["range"]["end"]].decode() == piece["text"]
        following = archive.recall({"locator": piece["continuation"]["after"], "project": P, "maxTokens": 300})
        assert following["range"]["start"] == piece["range"]["end"]
        assert full[following["range"]["start"] : following["range"]["end"]].decode() == following["text"]


def test_direct_id_gives_full_source_when_small_and_a_table_of_contents_otherwise(db_path, clock):
    with Archive.open(db_path, clock=clock) as archive:
        small = archive.admit(turn("s", "tiny", "2026-11-01T00:00:00Z"))
        big = archive.admit(
            {
                "project": P,
                "sessionId": "s",
                "kind": "tool-result",
                "createdAt": "2026-11-01T00:00:00Z",
                "messages": [{"role": "toolResult", "text": "x y z\n" * 100_000}],
            }
        )
        whole = archive.recall({"documentId": small["documentId"]})
        assert whole["materialization"] == "complete-source" and whole["text"].startswith("[user]\ntiny")
        toc = archive.recall({"documentId": big["documentId"]})
        assert toc["materialization"] == "table-of-contents" and toc["text"] == ""
        assert toc["tableOfContents"]["chunkCount"] == len(toc["tableOfContents"]["chunks"]) > 5
        assert archive.recall({"documentId": "doc-nope"})["status"] == "missing"


def test_supersede_command_rules(db_path, clock):
    with Archive.open(db_path, clock=clock) as archive:
        old = archive.admit(turn("s", "use port 8080 for the admin api", "2026-11-01T00:00:00Z"))
        new = archive.admit(turn("s", "use port 9090 for the admin api", "2026-11-02T00:00:00Z"))
        other = archive.admit({**turn("s", "elsewhere", "2026-11-03T00:00:00Z"), "project": "/elsewhere"})
        with pytest.raises(Conflict):
            archive.call(
                "supersede", {"documentId": new["documentId"], "by": {"documentId": old["documentId"]}}
            )  # newer
        with pytest.raises(Conflict):
            archive.call("supersede", {"documentId": old["documentId"], "by": {"documentId": other["documentId"]}})
        result = archive.call("supersede", {"documentId": old["documentId"], "by": {"documentId": new["documentId"]}})
        assert result["state"] == "superseded"
        hits = archive.search({"project": P, "query": "admin api port", "limit": 10})["results"]
        assert [r["documentId"] for r in hits] == [new["documentId"]]
        with pytest.raises(Conflict):  # no longer live
            archive.call("supersede", {"documentId": old["documentId"], "by": {"documentId": new["documentId"]}})
        # a lexical neighbour without an explicit link stays independent
        neighbour = archive.admit(turn("s", "the admin api also needs auth", "2026-11-04T00:00:00Z"))
        ids = {r["documentId"] for r in archive.search({"project": P, "query": "admin api", "limit": 10})["results"]}
        assert ids == {new["documentId"], neighbour["documentId"]}


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_WORDS = st.sampled_from(["alpha", "beta", "gamma", "delta", "漢字", "🚀", "x_y_z", "a1b2c3d4", "{", '"', "\n", "--"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.lists(_WORDS, min_size=1, max_size=3000),
    tool_name=st.sampled_from(["bash", "a very long tool name " * 8]),
    max_tokens=st.integers(39, 400),
    neighbors=st.integers(0, 3),
)
def test_recall_never_exceeds_max_tokens(tmp_path_factory, body, tool_name, max_tokens, neighbors):
    db = tmp_path_factory.mktemp("recall") / "a.db"
    text = " ".join(body) + " alpha"
    with Archive.open(db, clock=Clock("2026-11-10T00:00:00.000Z")) as archive:
        admitted = archive.admit(
            {
                "project": P,
                "sessionId": "s",
                "kind": "tool-result",
                "createdAt": "2026-11-01T00:00:00Z",
                "messages": [{"role": "toolResult", "toolName": tool_name, "text": text}],
            }
        )
        for hit in archive.search({"project": P, "query": "alpha", "limit": 3})["results"]:
            result = archive.recall(
                {"locator": hit["locator"], "project": P, "maxTokens": max_tokens, "neighbors": neighbors}
            )
            assert result["status"] == "resolved"
            assert estimate_tokens(result["header"] + result["text"]) <= max_tokens
        direct = archive.recall({"documentId": admitted["documentId"], "maxTokens": max_tokens})
        assert estimate_tokens(direct["text"]) <= max_tokens
