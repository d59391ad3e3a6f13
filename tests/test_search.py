"""Exact, structural and BM25F search: tiers, fixed evidence, calibration, scope, exclusion."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import apsw
import orjson
import pytest
from conftest import DISK_GUARD_OFF

from cwa.api import Archive
from cwa.config import load_settings
from cwa.errors import InvalidRequest, LimitExceeded
from cwa.index import exact
from cwa.index.lexical import COLUMNS, WEIGHTS
from cwa.retrieve.calibration import normalized_idf
from cwa.store import anchor_keys, anchor_lists

P = "/work/app"


def doc(
    session: str, *messages: tuple[str, str], kind: str = "turn", at: str = "2026-11-01T10:00:00Z", **extra
) -> dict:
    return {
        "project": P,
        "sessionId": session,
        "kind": kind,
        "createdAt": at,
        "messages": [{"role": role, "text": text} for role, text in messages],
        **extra,
    }


CORPUS = [
    doc(
        "s1",
        ("user", "The retry loop in src/retry.py never gives up."),
        ("assistant", "RetryPolicy compares attempt > max_attempts after incrementing."),
        at="2026-11-01T10:00:00Z",
    ),
    doc(
        "s1",
        (
            "toolResult",
            "E   retry.LockTimeoutError: ERR_LOCK_TIMEOUT after 30000 ms\nFAILED tests/test_retry.py::test_gives_up",
        ),
        kind="tool-result",
        at="2026-11-01T10:01:00Z",
    ),
    doc(
        "s1",
        ("assistant", 'Fixed in commit a1b2c3d4e5: we use "exponential backoff capped" at 30 s.'),
        at="2026-11-01T10:02:00Z",
    ),
    doc(
        "s2",
        ("user", "Please document the cache eviction policy for the session store."),
        ("assistant", "The cache evicts least recently used entries first."),
        at="2026-11-02T09:00:00Z",
    ),
    doc(
        "s2",
        ("user", "What is the file layout of the project?"),
        ("assistant", "Sources live under src and tests under tests."),
        at="2026-11-02T09:05:00Z",
    ),
]


@pytest.fixture
def corpus(db_path):
    with Archive.open(db_path, clock=lambda: "2026-11-03T00:00:00.000Z") as archive:
        ids = [archive.admit(d)["documentId"] for d in CORPUS]
        yield archive, ids


def search(archive, query=None, **extra):
    params = {"project": P, "limit": 10, **extra}
    if query is not None:
        params["query"] = query
    return archive.search(params)["results"]


@pytest.mark.parametrize(
    "query, match_type, index",
    [
        ("src/retry.py", "exact-path", 0),
        ("RetryPolicy", "exact-symbol", 0),
        ("ERR_LOCK_TIMEOUT", "exact-error", 1),
        ("a1b2c3d4e5", "exact-commit", 2),
        ('"exponential backoff capped"', "exact-quoted", 2),
    ],
)
def test_exact_inputs_come_back_as_exact_matches_above_lexical(corpus, query, match_type, index):
    archive, ids = corpus
    results = search(archive, query)
    assert results[0]["matchType"] == match_type
    assert results[0]["documentId"] == ids[index]
    tiers = [r["matchType"].startswith("exact-") for r in results]
    assert tiers == sorted(tiers, reverse=True)  # no lexical result above an exact one


def test_quoted_phrase_is_matched_verbatim_even_without_quotes_in_the_source(corpus):
    archive, ids = corpus
    results = search(archive, '"least recently used"')
    assert results[0]["matchType"] == "exact-quoted" and results[0]["documentId"] == ids[3]
    assert search(archive, '"used recently least"')[0]["matchType"] == "bm25"  # order matters


def test_case_sensitive_exact_before_folded(corpus):
    archive, ids = corpus
    exact = search(archive, "RetryPolicy")[0]
    folded = search(archive, "retrypolicy_x retryPOLICY")  # no case-sensitive hit for retryPOLICY
    hit = next(r for r in folded if r["matchType"].startswith("exact-"))
    assert exact["score"] == 0.75 and exact["band"] == "moderate"
    assert hit["documentId"] == ids[0] and hit["score"] == pytest.approx(0.75 * 0.9)


def test_fixed_evidence_for_common_word_and_distinctive_terms(corpus):
    archive, ids = corpus
    conn = archive.conn
    total = conn.execute("SELECT count(*) FROM windows").fetchone()[0]
    df = dict(conn.execute("SELECT term, doc FROM window_vocab").fetchall())

    # the fused order (the learned one adds session neighbours): weak on its own, expansion would widen it
    found = search(archive, "tests", expansion=False, ranker="fused")
    assert [r["matchType"] for r in found] == ["bm25", "bm25", "bm25"]
    common, context = found[:2], found[2]
    assert {r["documentId"] for r in common} == {ids[1], ids[4]}
    # the reply after the failing test output is found through its context field, last, and holds
    # no query term of its own: its evidence is nothing
    assert context["documentId"] == ids[2]
    assert context["matchedTerms"] == [] and context["score"] == 0.0 and context["band"] == "low"
    for r in common:
        assert r["matchedTerms"] == ["test"] and r["termCoverage"] == 1.0
        assert r["maxNormalizedIdf"] == normalized_idf(df["test"], total)
        assert r["score"] == round(1 - math.exp(-0.6), 4)  # one 4-letter stem: weak on its own
        assert r["band"] == "some"

    distinctive = search(archive, "eviction policy")
    top = distinctive[0]
    assert top["documentId"] == ids[3]
    assert top["matchedTerms"] == ["evict", "polici"] and top["termCoverage"] == 1.0
    assert top["maxNormalizedIdf"] == max(normalized_idf(df[t], total) for t in ("evict", "polici"))
    assert top["score"] == round(1 - math.exp(-(0.6 + 0.8)), 4)  # priors of a 5- and a 6-letter stem


def test_weak_evidence_is_expanded_and_keeps_its_own_scores(corpus):
    archive, ids = corpus
    weak = archive.search({"project": P, "query": "tests", "limit": 10, "ranker": "fused"})
    assert weak["expandedTerms"] and len(weak["expandedTerms"]) <= 8
    assert "test" not in weak["expandedTerms"]
    for result in weak["results"]:  # scores and matched terms stay those of the query itself
        assert set(result["matchedTerms"]) <= {"test"}
        assert result["score"] in (0.0, round(1 - math.exp(-0.6), 4))
    assert {ids[1], ids[4]} <= {r["documentId"] for r in weak["results"][:2]}
    assert archive.search({"project": P, "query": "ERR_LOCK_TIMEOUT"})["expandedTerms"] == []  # exact hit
    assert archive.search({"project": P, "query": "tests", "expansion": False})["expandedTerms"] == []


def test_a_rebuild_leaves_no_postings_of_an_anchor_the_extractor_no_longer_finds(corpus, monkeypatch):
    # A later cwa may read a text as an anchor no more (as line numbers stopped being values): the
    # rebuild indexes each document again, and no posting names the text it dropped.
    archive, _ = corpus
    text_id = archive.conn.execute("SELECT id FROM anchor_texts WHERE text = 'ERR_LOCK_TIMEOUT'").fetchone()[0]
    postings = "SELECT rowid FROM anchor_postings WHERE anchor_postings MATCH ?"
    assert archive.conn.execute(postings, (f"a{text_id}",)).fetchall()
    found = exact.document_anchors

    def without_the_code(document):
        anchors, cut = found(document)
        return [(a, n) for a, n in anchors if a.text != "ERR_LOCK_TIMEOUT"], cut

    monkeypatch.setattr(exact, "document_anchors", without_the_code)
    archive.call("index-rebuild", {})
    assert not archive.conn.execute(postings, (f"a{text_id}",)).fetchall()
    assert not archive.conn.execute("SELECT count(*) FROM anchor_texts WHERE id = ?", (text_id,)).fetchone()[0]
    assert archive.conn.execute("SELECT count(*) FROM anchors").fetchone()[0] > 0  # the others stay
    assert not [r for r in search(archive, "ERR_LOCK_TIMEOUT") if r["matchType"].startswith("exact")]


def colliding_codes() -> tuple[str, str]:
    """Two error codes whose texts share the anchor dictionary's three-byte key (one is met
    within a few thousand codes)."""
    seen: dict[int, str] = {}
    for number in range(1_000_000):
        code = f"ERR_SHARD_{number}"
        other = seen.setdefault(anchor_keys.key(code), code)
        if other != code:
            return other, code
    raise AssertionError("no two codes share a key")


def test_two_texts_sharing_a_dictionary_key_stay_two_texts_each_found_alone(db_path):
    first, second = colliding_codes()
    with Archive.open(db_path) as archive:
        one = archive.admit(doc("s1", ("toolResult", f"shard 3 failed: {first}"), kind="tool-result"))
        two = archive.admit(doc("s2", ("toolResult", f"shard 9 failed: {second}"), kind="tool-result"))
        again = archive.admit(doc("s3", ("user", f"{first} again, on shard 4")))
        texts = "SELECT text, key FROM anchor_texts WHERE text IN (?, ?)"
        stored = archive.conn.execute(texts, (first, second)).fetchall()
        assert sorted(stored) == sorted([(first, anchor_keys.key(first)), (second, anchor_keys.key(first))])
        for code, expected in ((first, {one["documentId"], again["documentId"]}), (second, {two["documentId"]})):
            found = [r for r in search(archive, code) if r["matchType"].startswith("exact")]
            assert {r["documentId"] for r in found} == expected


def test_evidence_recomputes_identically_after_rebuild(corpus):
    archive, _ = corpus
    queries = ["eviction policy", "tests", "ERR_LOCK_TIMEOUT", "retry loop gives up"]
    before = [
        [
            (r["documentId"], r["score"], r["rawScore"], r["matchedTerms"], r["maxNormalizedIdf"])
            for r in search(archive, q)
        ]
        for q in queries
    ]
    relations = archive.search({"project": P, "relation": "latest-question"})["results"]
    count = "SELECT (SELECT value FROM index_stats WHERE name = 'windows'), (SELECT count(*) FROM windows)"
    kept, counted = archive.conn.execute(count).fetchone()
    assert kept == counted > 0
    # each text a document's list holds has its posting: (texts listed, of them posted, documents)
    postings = "SELECT rowid FROM anchor_postings WHERE anchor_postings MATCH ?"

    def held() -> tuple[int, int, int]:
        lists = archive.conn.execute("SELECT document_row, packed FROM anchors").fetchall()
        pairs = [(row, text_id) for row, packed in lists for text_id in anchor_lists.text_ids(packed)]
        posted = sum(row in {r for (r,) in archive.conn.execute(postings, (f"a{t}",))} for row, t in pairs)
        return len(pairs), posted, len(lists)

    listed = held()
    assert listed[0] == listed[1] > listed[2] > 0
    archive.call("index-rebuild", {})
    assert archive.conn.execute(count).fetchone() == (counted, counted)
    assert held() == listed  # every listed text has its posting again
    after = [
        [
            (r["documentId"], r["score"], r["rawScore"], r["matchedTerms"], r["maxNormalizedIdf"])
            for r in search(archive, q)
        ]
        for q in queries
    ]
    assert after == before
    assert [r["documentId"] for r in archive.search({"project": P, "relation": "latest-question"})["results"]] == [
        r["documentId"] for r in relations
    ]


def test_weak_top_hit_is_not_strong_and_scores_ignore_weaker_candidates(db_path):
    with Archive.open(db_path) as archive:
        first = archive.admit(doc("s", ("user", "the deployment checklist mentions rollback once")))
        alone = search(archive, "rollback")
        assert alone[0]["documentId"] == first["documentId"]
        assert alone[0]["band"] != "high" and alone[0]["score"] < 0.8  # top rank does not make it strong
        for n in range(20):  # weaker candidates: they mention only one of the two terms
            archive.admit(doc("s", ("user", f"rollback step {n} of something unrelated")))
        strong = search(archive, "deployment checklist")[0]
        assert strong["documentId"] == first["documentId"]
        archive.admit(doc("s", ("user", "a checklist for groceries")))
        archive.admit(doc("s", ("user", "deployment happened on friday")))
        again = search(archive, "deployment checklist")
        assert again[0]["documentId"] == first["documentId"]
        assert again[0]["score"] == strong["score"]
        assert search(archive, "rollback")[0]["score"] == alone[0]["score"]


def test_bm25f_user_text_outweighs_assistant_which_outweighs_tool_output(db_path):
    text = "the flaky websocket reconnect handler drops frames"
    with Archive.open(db_path) as archive:
        ids = {
            role: archive.admit(doc(f"s-{role}", (role, text), kind="turn" if role != "toolResult" else "tool-result"))[
                "documentId"
            ]
            for role in ("toolResult", "assistant", "user")
        }
        ranked = [r["documentId"] for r in search(archive, "websocket reconnect frames")]
    assert ranked == [ids["user"], ids["assistant"], ids["toolResult"]]


def test_document_without_role_structure_scores_exactly_as_unweighted_bm25(db_path):
    with Archive.open(db_path) as archive:
        archive.admit(doc("s", ("toolResult", "alpha beta gamma alpha"), kind="tool-result"))
        archive.admit(doc("s", ("custom", "beta delta"), kind="manual"))
        conn = archive.conn
        weighted = conn.execute(
            f"SELECT rowid, bm25(window_fts, {', '.join(str(WEIGHTS[c]) for c in COLUMNS)}) FROM window_fts "
            "WHERE window_fts MATCH 'alpha OR beta' ORDER BY rowid"
        ).fetchall()
        plain = conn.execute(
            "SELECT rowid, bm25(window_fts) FROM window_fts WHERE window_fts MATCH 'alpha OR beta' ORDER BY rowid"
        ).fetchall()
    assert weighted == plain


def test_visible_source_keys_exclude_candidates(db_path):
    with Archive.open(db_path) as archive:
        shown = archive.admit(doc("s", ("user", "rotate the signing keys every quarter")))
        hidden = archive.admit(doc("s", ("user", "signing keys live in the vault")))
        both = {r["documentId"] for r in search(archive, "signing keys")}
        assert both == {shown["documentId"], hidden["documentId"]}
        visible = shown["messageKeys"]
        rest = search(archive, "signing keys", excludeVisibleSourceKeys=visible)
        assert [r["documentId"] for r in rest] == [hidden["documentId"]]
        exact = search(archive, '"signing keys"', excludeVisibleSourceKeys=visible)
        assert shown["documentId"] not in {r["documentId"] for r in exact}


def test_visible_key_limits_are_checked_before_any_work(archive):
    with pytest.raises(LimitExceeded):
        archive.search({"project": P, "query": "x", "excludeVisibleSourceKeys": [f"k{n}" for n in range(1001)]})
    with pytest.raises(LimitExceeded):
        archive.search(
            {"project": P, "query": "x", "excludeVisibleSourceKeys": ["漢" * 400 + str(n) for n in range(1000)]}
        )
    with pytest.raises(InvalidRequest):
        archive.search({"project": P})


def test_one_result_per_document_and_identical_copies_collapse(db_path):
    repeated = "\n".join(f"line {n}: connection pool exhausted in worker" for n in range(400))
    with Archive.open(db_path) as archive:
        first = archive.admit(doc("s", ("toolResult", repeated), kind="tool-result"))
        archive.admit(doc("s2", ("toolResult", repeated), kind="tool-result"))  # an alias
        results = search(archive, "connection pool exhausted")
    assert [r["documentId"] for r in results] == [first["documentId"]]


def test_scope_session_lineage_project_and_all(db_path, tmp_path):
    with Archive.open(db_path) as archive:
        parent = archive.admit(doc("parent", ("user", "kubernetes ingress annotations")))
        child = archive.admit(doc("child", ("user", "kubernetes ingress timeouts"), parentSessionId="parent"))
        other = archive.admit(doc("other", ("user", "kubernetes ingress tls")))
        foreign = archive.admit({**doc("x", ("user", "kubernetes ingress elsewhere")), "project": "/other"})
        session = {r["documentId"] for r in search(archive, "kubernetes ingress", scope="session", sessionId="child")}
        assert session == {parent["documentId"], child["documentId"]}
        project = {r["documentId"] for r in search(archive, "kubernetes ingress")}
        assert project == {parent["documentId"], child["documentId"], other["documentId"]}
        capped = archive.search({"project": P, "query": "kubernetes ingress", "scope": "all", "limit": 10})
        assert capped["scope"] == "project" and capped["requestedScope"] == "all"  # maxReadScope default
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), **DISK_GUARD_OFF}
    (tmp_path / "cfg" / "cwa").mkdir(parents=True)
    (tmp_path / "cfg" / "cwa" / "config.json").write_text('{"maxReadScope": "all"}')
    with Archive.open(db_path, settings=load_settings(None, env=env)) as archive:
        everything = {r["documentId"] for r in search(archive, "kubernetes ingress", scope="all")}
    assert foreign["documentId"] in everything and len(everything) == 4


def test_relation_with_query_uses_single_messages(db_path):
    with Archive.open(db_path) as archive:
        archive.admit(
            doc(
                "s",
                ("user", "No, use the staging database instead."),
                ("assistant", "Switching the migration runner to staging."),
                at="2026-11-01T10:00:00Z",
            )
        )
        archive.admit(
            doc(
                "s",
                ("user", "Actually, keep the feature flag off."),
                ("assistant", "The migration runner keeps the flag off."),
                at="2026-11-02T10:00:00Z",
            )
        )
        latest = archive.search({"project": P, "relation": "latest-correction"})
        assert latest["resolution"] == {"relation": "latest-correction", "status": "resolved"}
        assert latest["results"][0]["snippet"].startswith("Actually, keep the feature flag off")
        assert latest["results"][0]["resolution"] == "resolved"
        about = archive.search({"project": P, "relation": "latest-correction", "query": "staging database"})
        assert about["results"][0]["snippet"].startswith("No, use the staging database")
        # "migration runner" appears only in assistant siblings: it cannot satisfy a correction
        sibling = archive.search({"project": P, "relation": "latest-correction", "query": "migration runner"})
        assert sibling["results"] == [] and sibling["resolution"]["status"] == "not-found"
        decision = archive.search({"project": P, "relation": "latest-decision"})
        assert decision["resolution"]["status"] == "not-found"


def test_a_path_is_found_by_its_trailing_segments(db_path):
    with Archive.open(db_path) as archive:
        target = archive.admit(
            doc("s", ("toolResult", 'File "/home/dev/app/src/cache/lru.py", line 12, in get'), kind="tool-result")
        )
        archive.admit(doc("s", ("user", "the lru cache in src looks wrong")))
        for query in ("src/cache/lru.py", "cache/lru.py", "lru.py", "/home/dev/app/src/cache/lru.py"):
            top = search(archive, query)[0]
            assert (top["matchType"], top["documentId"]) == ("exact-path", target["documentId"]), query
        assert search(archive, "other/lru.py")[0]["matchType"] == "bm25"


def test_long_runs_of_one_character_between_anchors_are_indexed_and_the_anchors_found(db_path):
    # Base64 blobs, padding and progress bars put runs of hundreds of kilobytes without a space into
    # tool output. Each anchor pattern must scan them in linear time (a lookahead before its word
    # boundary rescanned the rest of the word from each character: a quadratic hang).
    blob = " ".join(("x" * 200_000, "src/cache/lru.py", "A" * 100_000, "7" * 100_000, "aB" * 50_000, "a." * 50_000))
    with Archive.open(db_path) as archive:
        target = archive.admit(doc("s", ("toolResult", blob + " ERR_LOCK_TIMEOUT"), kind="tool-result"))
        for query, kind in (("src/cache/lru.py", "exact-path"), ("ERR_LOCK_TIMEOUT", "exact-error")):
            top = search(archive, query)[0]
            assert (top["matchType"], top["documentId"]) == (kind, target["documentId"]), query


def test_a_dotted_name_is_found_by_its_last_parts(db_path):
    with Archive.open(db_path) as archive:
        target = archive.admit(
            doc("s", ("toolResult", "E   retry.policy.BackoffPolicy.next_delay() returned -1"), kind="tool-result")
        )
        for query in (
            "BackoffPolicy.next_delay",
            "BackoffPolicy",
            "next_delay",
            "retry.policy.BackoffPolicy.next_delay",
        ):
            top = search(archive, query)[0]
            assert (top["matchType"], top["documentId"]) == ("exact-symbol", target["documentId"]), query


def test_snippets_stay_within_their_token_share(db_path):
    from cwa.tokens import estimate_tokens

    long_text = ("漢字 and 🚀 symbols around the keyword " * 40) + " needle_value " + ("tail words " * 200)
    with Archive.open(db_path) as archive:
        for n in range(3):
            archive.admit(doc(f"s{n}", ("toolResult", long_text + str(n)), kind="tool-result"))
        for budget, limit in ((40, 2), (160, 3), (0, 1)):
            results = archive.search(
                {"project": P, "query": "needle_value keyword", "limit": limit, "hintBudgetTokens": budget}
            )["results"]
            share = max(16, min(80, budget // limit)) if budget else 16
            assert results and all(estimate_tokens(r["snippet"]) <= share for r in results)
            if share >= 24:  # room for the 12-token identifier and both ellipses
                assert all("needle_value" in r["snippet"] for r in results if r["matchType"] == "exact-symbol")


def test_scope_filter_finds_a_weak_match_behind_many_stronger_ones_elsewhere(db_path):
    with Archive.open(db_path) as archive:
        for n in range(120):  # another project's much better matches fill the first ranked batches
            archive.admit(
                {**doc(f"b{n}", ("user", "gravity gravity gravity well orbit " * 3 + str(n))), "project": "/b"}
            )
        mine = archive.admit(
            doc(
                "a",
                ("toolResult", "a long log line that mentions gravity once among many other words " + "filler " * 150),
                kind="tool-result",
            )
        )
        results = search(archive, "gravity")
    assert [r["documentId"] for r in results] == [mine["documentId"]]


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_QUERY_PIECES = st.sampled_from(
    [
        '"',
        "'",
        "`",
        "NEAR",
        "AND",
        "OR",
        "NOT",
        "(",
        ")",
        "*",
        "^",
        ":",
        "-",
        "hello",
        "src/a.py",
        "a1b2c3d4",
        "ERR_X_Y",
        "\\",
        "{",
        "漢",
        "🚀",
        " ",
        'https://x.y/z?q="1"',
        "~/",
        "#12",
        "v1.2.3",
        "30 s",
        "\u0000",
        "\n",
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(_QUERY_PIECES, min_size=1, max_size=10))
def test_any_query_text_is_answered_without_error(corpus, pieces):
    archive, _ = corpus
    query = "".join(pieces)
    if not query:
        return
    response = archive.search({"project": P, "query": query, "limit": 5, "leaseSeconds": 0})
    for result in response["results"]:
        assert 0.0 <= result["score"] <= 1.0 and result["band"] in ("high", "moderate", "some", "low")


def test_a_common_term_s_count_is_reused_until_the_archive_grows_by_a_tenth(tmp_path, monkeypatch):
    # fts5vocab reads a term's whole posting list to count it; a common term's count is kept per
    # archive file and read again only once the window count has moved by more than 10%.
    from cwa.retrieve import context

    monkeypatch.setattr(context, "COMMON_TERM_WINDOWS", 5)
    first, second = tmp_path / "one.db", tmp_path / "two.db"
    with Archive.open(first) as one, Archive.open(second) as two:
        for n in range(30):
            one.admit(doc(f"s{n}", ("user", f"alpha note {n}")))
        two.admit(doc("s1", ("user", "alpha once")))

        def alpha(archive) -> int:
            ctx = context.Context(archive.conn, None, None, frozenset(), "", set())
            return context.frequencies(ctx, ["alpha", "note"])[0]["alpha"]

        windows = one.conn.execute("SELECT count(*) FROM windows").fetchone()[0]
        assert alpha(one) == windows
        one.admit(doc("t1", ("user", "alpha again")))  # within a tenth: the kept count is used
        assert alpha(one) == windows
        assert alpha(two) == 1  # another archive file counts its own
        for n in range(4):
            one.admit(doc(f"u{n}", ("user", f"alpha more {n}")))
        assert alpha(one) == one.conn.execute("SELECT count(*) FROM windows").fetchone()[0] == windows + 5


def test_an_unselective_query_is_scored_over_the_newest_windows_first_and_grows_to_fill_its_page(tmp_path, monkeypatch):
    # Every window holds both words: FTS5 would score them all. The newest id range of the
    # project's windows expected to hold POSTINGS_BUDGET matches is scored first, and grows while
    # the scope finds too few.
    from cwa.retrieve import search as searching

    monkeypatch.setattr(searching, "POSTINGS_BUDGET", 200)
    monkeypatch.setattr(searching, "SLICE_MATCHES", 300)
    with Archive.open(tmp_path / "a.db") as archive:
        rows = []
        for n in range(400):
            # The oldest half matches best (both words twice, nothing else); the twenty oldest and
            # three among the newest are another project's, whose windows take ids of its own block.
            text = "common word common word" if n < 200 else f"common word in a longer note, number {n}"
            request = doc(f"s{n}", ("user", text), at=f"2026-11-{1 + n // 60:02d}T10:{n % 60:02d}:00Z")
            request["project"] = "/work/other" if n < 20 or n in (249, 299, 349) else P
            rows.append(archive.admit(request)["documentId"])
        own = [row for n, row in enumerate(rows) if not (n < 20 or n in (249, 299, 349))]
        search = {"query": "common word", "limit": 3, "leaseSeconds": 0, "semanticPolicy": "never"}
        found = archive.search({**search, "project": P})["results"]
        assert len(found) == 3 and {r["documentId"] for r in found} <= set(own[-200:])  # its newest 200 windows
        # Wanting more than the newest slice holds grows it to the older, better matches.
        monkeypatch.setattr(searching, "LEXICAL_POOL", 400)
        many = archive.search({**search, "project": P, "limit": 50})["results"]
        assert len(many) == 50 and {r["documentId"] for r in many} & set(rows[20:200])


def test_an_unselective_query_of_every_project_slices_the_newest_block_then_takes_every_window(tmp_path, monkeypatch):
    # Window ids are dense only within a project's block: a search of every project slices the
    # newest block's windows, newest first, and past that block scores every window at once.
    from cwa.retrieve import search as searching

    monkeypatch.setattr(searching, "POSTINGS_BUDGET", 200)
    monkeypatch.setattr(searching, "SLICE_MATCHES", 300)
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), **DISK_GUARD_OFF}
    (tmp_path / "cfg" / "cwa").mkdir(parents=True)
    (tmp_path / "cfg" / "cwa" / "config.json").write_text('{"maxReadScope": "all"}')
    with Archive.open(tmp_path / "a.db", settings=load_settings(None, env=env)) as archive:
        rows = {"/work/first": [], "/work/second": []}
        for n in range(400):  # the sessions alternate; the first project's block is the older one
            project = "/work/first" if n % 2 == 0 else "/work/second"
            text = f"common word common word {n}" if project == "/work/first" else f"common word in a note, number {n}"
            request = {**doc(f"s{n % 2}", ("user", text)), "project": project}
            rows[project].append(archive.admit(request)["documentId"])
        newest_block = (
            "SELECT p.identity FROM windows AS w JOIN documents AS d ON d.id = w.document_row "
            "JOIN projects AS p ON p.id = d.project_id ORDER BY w.id DESC LIMIT 1"
        )
        latest = archive.conn.execute(newest_block).fetchone()[0]
        assert latest == "/work/second"  # its windows match worse than the older block's
        search = {"project": P, "query": "common word", "leaseSeconds": 0, "semanticPolicy": "never", "scope": "all"}
        found = archive.search({**search, "limit": 3})
        assert found["scope"] == "all" and len(found["results"]) == 3
        assert {r["documentId"] for r in found["results"]} <= set(rows[latest])  # its 200: the budget
        monkeypatch.setattr(searching, "LEXICAL_POOL", 400)
        many = {r["documentId"] for r in archive.search({**search, "limit": 100})["results"]}
        assert len(many) == 100 and many <= set(rows["/work/first"])  # every window scored: the better ones


def _varied_archive(archive: Archive, documents: int = 240) -> None:
    """Documents of a small seeded vocabulary over user, assistant and tool-output text, so terms
    differ in frequency, column and row length."""
    import random

    rng = random.Random(7)
    words = ["lock", "retry", "cache", "policy", "worker", "timeout", "session", "handler", "queue", "index"]
    for n in range(documents):
        said = " ".join(rng.choice(words[: 3 + n % 8]) for _ in range(rng.randint(3, 30)))
        answer = " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))
        if n % 5 == 4:
            archive.admit(doc(f"s{n % 7}", ("toolResult", said), kind="tool-result"))
        else:
            archive.admit(doc(f"s{n % 7}", ("user", said), ("assistant", answer)))


def test_bm25_with_known_counts_scores_exactly_as_fts5(tmp_path):
    # cwa_bm25 is bm25() fed the phrases' window counts instead of counting them: given exact
    # counts, every score is the same float, for AND and for OR expressions with context twins,
    # and so is the score without the context field each path keeps beside it.
    from cwa.index.lexical import WEIGHTS
    from cwa.index.terms import context_term
    from cwa.retrieve import bm25
    from cwa.store.sqlfiles import queries

    sql = queries("search")
    with Archive.open(tmp_path / "a.db") as archive:
        _varied_archive(archive)
        conn = archive.conn
        bm25.register(conn)

        def windows_holding(term: str) -> int:
            row = conn.execute(sql["term_frequency"], (term,)).fetchone()
            return row[0] if row else 0

        expressions = [
            (["lock", "retri"], '"lock" AND "retri"'),
            (["session", "handler", "queue"], '"session" AND "handler" AND "queue"'),
            (
                ["polici", context_term("polici"), "cach", context_term("cach")],
                '("polici" OR "·polici") OR ("cach" OR "·cach")',
            ),
        ]
        compared = 0
        base = conn.execute("SELECT min(id) - 1 FROM windows").fetchone()[0]  # the project's block
        for phrases, match in expressions:
            # all, a newest slice, a part of a project's range
            for low, high in ((0, 1 << 62), (base + 150, 1 << 62), (base + 40, base + 200)):
                bounds = {"low": low, "high": high}
                fts5 = conn.execute(sql["lexical_top"], {"match": match, **WEIGHTS, "k": 25, **bounds})
                known = conn.execute(
                    sql["lexical_top_known_idf"],
                    {
                        "match": match,
                        "hits": orjson.dumps([windows_holding(p) for p in phrases]).decode(),
                        "own": 1,
                        "k": 25,
                        **bounds,
                    },
                )
                expected, found = fts5.fetchall(), known.fetchall()
                assert found and dict(found) == {w: score for w, score, _ in expected}
                own = bm25.own_scores(conn)
                assert {w: own[w] for w, _ in found} == {w: without for w, _, without in expected}
                if "·" in match:  # the context field counts: some window scores less without it
                    assert any(without > score for _, score, without in expected)
                compared += len(found)
        assert compared > 100
        # not asked (preflight, a short history): the same scores, none kept aside
        params = {"match": match, "hits": orjson.dumps([windows_holding(p) for p in phrases]).decode(), "k": 25}
        unkept = conn.execute(sql["lexical_top_known_idf"], {**params, "own": 0, **bounds}).fetchall()
        assert unkept == found and bm25.own_scores(conn) == {}


def test_the_known_count_path_finds_what_fts5_s_own_ranking_finds(tmp_path, monkeypatch):
    # Whichever side of the cost rule a query falls on, search returns the same results: through
    # FTS5's bm25() and through cwa_bm25 with the counts search holds, AND, OR and sliced alike.
    from cwa.retrieve import bm25
    from cwa.retrieve import search as searching

    monkeypatch.setattr(searching, "POSTINGS_BUDGET", 60)
    monkeypatch.setattr(searching, "SLICE_MATCHES", 90)
    with Archive.open(tmp_path / "a.db") as archive:
        _varied_archive(archive)
        queries = ["lock retry", "session handler queue", "cache policy", "worker timeout index", "retry"]
        answers = {}
        for forced in (False, True):
            monkeypatch.setattr(bm25, "cheaper", lambda *_, forced=forced: forced)
            answers[forced] = [
                [
                    (r["documentId"], r["score"])
                    for r in archive.search(
                        {"project": P, "query": q, "limit": 8, "leaseSeconds": 0, "semanticPolicy": "never"}
                    )["results"]
                ]
                for q in queries
            ]
        assert all(answers[False]) and answers[True] == answers[False]


def listed_anchors(conn: apsw.Connection) -> list[tuple[int, str, int, int, int, int]]:
    """Every anchor the documents' lists hold: (document row, text, types, start, end, occurrences)."""
    texts = dict(conn.execute("SELECT id, text FROM anchor_texts"))
    lists = conn.execute("SELECT document_row, packed FROM anchors").fetchall()
    return [(row, texts[text_id], *rest) for row, packed in lists for text_id, *rest in anchor_lists.unpack(packed)]


def test_a_text_found_as_two_types_is_one_anchor_row_at_its_most_specific_occurrence(tmp_path):
    # `retry_policy` is a symbol twice, and quoted (more specific) only the second time: one row,
    # both types' bits, the quoted occurrence's range and count; exact search finds it either way.
    from cwa.index.exact import TYPE_IDS

    with Archive.open(tmp_path / "a.db") as archive:
        admitted = archive.admit(doc("s1", ("user", 'see retry_policy first, then "retry_policy" again')))
        rows = [rest for _, text, *rest in listed_anchors(archive.conn) if text == "retry_policy"]
        assert len(rows) == 1
        types, start, end, occurrences = rows[0]
        assert types == (1 << TYPE_IDS["quoted"]) | (1 << TYPE_IDS["symbol"]) and occurrences == 1
        text = archive.get({"documentId": admitted["documentId"]})["text"].encode()
        assert text[start:end] == b"retry_policy" and text[start - 1 : start] == b'"'
        found = archive.search({"project": P, "query": "retry_policy", "semanticPolicy": "never"})["results"]
        assert found[0]["documentId"] == admitted["documentId"] and found[0]["matchType"].startswith("exact")


def test_a_line_number_after_a_file_name_is_not_a_value_anchor_but_a_port_is(tmp_path):
    # Tool output names `file.py:42` on every line; the `:42` (and a column after it) is where in
    # the file, not a port, so it gets no anchor row. `host:8080` still does, and a query naming
    # `file.py:42` still finds the output by its path.
    lint = "\n".join(f"src/pkg_{n}/retry.py:{n + 10}:{n + 3}: E501 line too long" for n in range(40))
    with Archive.open(tmp_path / "a.db") as archive:
        output = archive.admit(doc("s1", ("toolResult", lint), kind="tool-result"))
        archive.admit(doc("s1", ("user", "the admin api listens on localhost:8080 now, see config.py:8080")))
        listed = listed_anchors(archive.conn)
        texts = {text for _, text, *_ in listed}
        assert not any(t.startswith(":") and t != ":8080" for t in texts)
        assert {":8080", "src/pkg_7/retry.py", "retry.py", "E501"} <= texts
        port = [occurrences for _, text, *_, occurrences in listed if text == ":8080"]
        assert port == [1]  # the line 8080 of config.py is not the port
        found = archive.search({"project": P, "query": "src/pkg_7/retry.py:17", "semanticPolicy": "never"})
        assert found["results"][0]["documentId"] == output["documentId"]
        assert found["results"][0]["matchType"].startswith("exact")


def test_folding_ascii_takes_a_shortcut_to_the_same_text():
    import unicodedata

    from cwa.index.exact import fold

    ascii_text = "".join(map(chr, range(128))) + "Retry_Policy SRC/Retry.PY ÄÖ"[:20]
    for text in (ascii_text, "ÄÖ ﬁle ＡＢＣ", "Straße"):
        assert fold(text) == unicodedata.normalize("NFKC", text).casefold()


def test_a_common_term_s_count_is_kept_in_the_archive_for_the_next_process_until_a_purge(tmp_path, monkeypatch):
    # A new process reads a common term's count from `term_counts` instead of its posting list;
    # a read-only connection counts without keeping; any purge empties the table.
    from cwa.retrieve import context
    from cwa.store.connection import open_read_only

    monkeypatch.setattr(context, "COMMON_TERM_WINDOWS", 5)
    monkeypatch.setattr(context, "_COMMON", {})
    path = tmp_path / "one.db"
    with Archive.open(path) as archive:
        for n in range(30):
            archive.admit(doc(f"s{n}", ("user", f"alpha note {n}")))
        windows = archive.conn.execute("SELECT count(*) FROM windows").fetchone()[0]

        def counts(conn) -> dict[str, int]:
            ctx = context.Context(conn, None, None, frozenset(), "", set())
            return context.frequencies(ctx, ["alpha", "note", "once"])[0]

        assert counts(archive.conn) == {"alpha": windows, "note": windows, "once": 0}
        kept = "SELECT term, windows, counted_at_windows FROM term_counts ORDER BY term"
        assert archive.conn.execute(kept).fetchall() == [("alpha", windows, windows), ("note", windows, windows)]
        # the next process: nothing in memory, the kept count is read (a planted one, to tell)
        context._COMMON.clear()
        archive.conn.execute("UPDATE term_counts SET windows = 7 WHERE term = 'alpha'")
        assert counts(archive.conn)["alpha"] == 7
        context._COMMON.clear()
        archive.conn.execute("DELETE FROM term_counts WHERE term = 'note'")
        reader = open_read_only(path)
        try:  # a read-only connection counts 'note' and cannot keep it: no error, nothing kept
            assert counts(reader) == {"alpha": 7, "note": windows, "once": 0}
        finally:
            reader.close()
        assert [t for t, _, _ in archive.conn.execute(kept)] == ["alpha"]
        # a rebuild forgets them too (a tokenizer may have changed); none is in the 5,000 windows
        # its own refresh keeps
        archive.call("index-rebuild", {})
        assert archive.conn.execute(kept).fetchall() == []
        context._COMMON.clear()
        counts(archive.conn)  # counted and kept again
        assert [t for t, _, _ in archive.conn.execute(kept)] == ["alpha", "note"]
        asked = archive.call("redact", {"project": P, "sessionId": "s3"})
        archive.call("redact", {"project": P, "sessionId": "s3", "confirm": asked["confirm"]})
        archive.call("maintain", {})
        assert archive.conn.execute(kept).fetchall() == []


def test_a_maintenance_pass_keeps_every_common_term_so_a_new_process_counts_none(tmp_path, monkeypatch):
    # A search keeps only the common terms it met; a maintenance pass reads the vocabulary once and
    # keeps every term over the threshold, again only once the archive has grown by a tenth. A
    # purge or a rebuild between its read and its write (`read_common`, `keep`) stops the write.
    from cwa.retrieve import context
    from cwa.store import term_counts

    for module in (context, term_counts):
        monkeypatch.setattr(module, "COMMON_TERM_WINDOWS", 5)
    monkeypatch.setattr(context, "_COMMON", {})
    kept = "SELECT term, windows FROM term_counts ORDER BY term"
    with Archive.open(tmp_path / "one.db") as archive:
        for n in range(30):
            archive.admit(doc(f"s{n}", ("user", f"alpha note {n % 3} zeta{n}")))
        windows = archive.conn.execute("SELECT count(*) FROM windows").fetchone()[0]
        assert archive.call("maintain", {})["termCountsKept"] == 5  # alpha, note, 0, 1, 2
        assert archive.conn.execute(kept).fetchall() == [
            ("0", 10),
            ("1", 10),
            ("2", 10),
            ("alpha", windows),
            ("note", windows),
        ]
        assert archive.call("maintain", {})["termCountsKept"] == 0  # complete, and the archive the same

        counted = []
        archive.conn.set_profile(lambda sql, _: counted.append(sql) if "window_vocab" in sql else None)
        ctx = context.Context(archive.conn, None, None, frozenset(), "", set())
        assert context.frequencies(ctx, ["alpha", "note", "zeta7"])[0] == {
            "alpha": windows,
            "note": windows,
            "zeta7": 1,
        }
        archive.conn.set_profile(None)
        assert len(counted) == 1  # only the rare term was counted; the new process read the rest

        for n in range(4):  # past a tenth more windows: the next pass reads the vocabulary again
            archive.admit(doc(f"t{n}", ("user", f"alpha again {n}")))
        assert archive.call("maintain", {})["termCountsKept"] == 5
        assert dict(archive.conn.execute(kept).fetchall())["alpha"] == windows + 4

        for n in range(4):
            archive.admit(doc(f"u{n}", ("user", f"alpha more {n}")))
        found = term_counts.read_common(archive.conn)
        assert found is not None
        # A rebuild forgets the counts after they were read, then keeps them afresh itself.
        assert archive.call("index-rebuild", {})["termCountsKept"] == 5
        rebuilt = archive.conn.execute(kept).fetchall()
        assert dict(rebuilt)["alpha"] == windows + 8
        assert term_counts.keep(archive.conn, found) == 0  # the stale read writes nothing
        assert archive.conn.execute(kept).fetchall() == rebuilt


def test_serve_s_maintenance_worker_keeps_the_common_terms_as_it_starts_not_after_its_first_interval(
    tmp_path, monkeypatch
):
    # The worker's first full pass waits an interval (10 minutes in serve); the common terms'
    # counts are kept as soon as its connection is open, so a new serve's searches count none.
    import time

    from cwa.store import term_counts
    from cwa.store.maintenance import PeriodicMaintenance

    monkeypatch.setattr(term_counts, "COMMON_TERM_WINDOWS", 5)
    path = tmp_path / "one.db"
    with Archive.open(path) as archive:
        for n in range(30):
            archive.admit(doc(f"s{n}", ("user", f"alpha note {n}")))
        windows = archive.conn.execute("SELECT count(*) FROM windows").fetchone()[0]
        worker = PeriodicMaintenance(str(path), archive.clock, {}, interval=3600).start()
        try:
            kept: list = []
            deadline = time.monotonic() + 30
            while not kept and time.monotonic() < deadline:
                time.sleep(0.05)
                kept = archive.conn.execute("SELECT term, windows FROM term_counts ORDER BY term").fetchall()
        finally:
            worker.close()
        assert kept == [("alpha", windows), ("note", windows)] and worker.passes == 0


SPANS = "SELECT p.identity, s.low, s.high FROM project_window_spans AS s JOIN projects AS p ON p.id = s.project_row"
TRUE_SPANS = (
    "SELECT p.identity, min(w.id), max(w.id) FROM windows AS w JOIN documents AS d ON d.id = w.document_row "
    "JOIN projects AS p ON p.id = d.project_id GROUP BY p.identity"
)


def test_a_project_s_search_is_bounded_to_its_window_range_which_holds_every_window_it_has(tmp_path):
    # Each project's window id range is kept as its windows are indexed, interleaved or not, and
    # recomputed by a rebuild; FTS5 scores only the ids within it, so a window outside would be lost.
    # Each project's windows take ids from a block of its own, so interleaved sessions still leave
    # a project's range holding none of another's windows.
    other = "/work/other"
    with Archive.open(tmp_path / "a.db") as archive:
        for n in range(12):
            request = doc(f"s{n}", ("user", f"alpha note {n}"))
            request["project"] = P if n < 4 or n == 11 else other
            archive.admit(request)
        late = doc("s12", ("user", "alpha zebra in the project's newest note"))
        late_id = archive.admit(late)["documentId"]
        spans = lambda: sorted(archive.conn.execute(SPANS).fetchall())  # noqa: E731
        assert spans() == sorted(archive.conn.execute(TRUE_SPANS).fetchall()) and len(spans()) == 2
        (_, low_a, high_a), (_, low_b, high_b) = spans()
        assert high_a < low_b or high_b < low_a  # disjoint, though the sessions alternated
        holds = {P: 6, other: 7}  # each range holds just its project's windows, one id each
        assert {project: high - low + 1 for project, low, high in spans()} == holds
        assert max(high_a, high_b) < 2**53  # exact as a JSON number anywhere

        def found(query: str, project: str = P) -> list[str]:
            request = {"project": project, "query": query, "limit": 20, "leaseSeconds": 0, "semanticPolicy": "never"}
            return [r["documentId"] for r in archive.search(request)["results"]]

        assert found("zebra") == [late_id]
        assert len(found("alpha")) == 6 and len(found("alpha", other)) == 7
        # The range is what bounds the search: narrowed below the newest window, that window is lost.
        archive.conn.execute(
            "UPDATE project_window_spans SET high = high - 1 WHERE project_row = "
            "(SELECT project_id FROM documents WHERE document_id = ?)",
            (late_id,),
        )
        assert found("zebra") == [] and len(found("alpha")) == 5
        # A rebuild gives every window a new id: the ranges are recomputed, not widened.
        archive.call("index-rebuild", {})
        assert spans() == sorted(archive.conn.execute(TRUE_SPANS).fetchall())
        assert {project: high - low + 1 for project, low, high in spans()} == holds  # still in blocks
        assert found("zebra") == [late_id] and len(found("alpha")) == 6


def test_projects_indexed_before_blocks_keep_their_ids_until_a_rebuild_moves_them_into_blocks(tmp_path):
    # An archive whose windows were indexed before blocks holds every project's windows one after
    # another (block 0, which is also the first project's block). Its projects keep adding there,
    # so their ranges stay as they were; a new project gets its own block; `cwa index rebuild`
    # moves every project into its block.
    from cwa.index.exact import ExactHandler
    from cwa.index.lexical import PROJECT_BLOCK_BITS, LexicalHandler
    from cwa.index.semantic import SemanticQueueHandler
    from cwa.index.structure import StructuralHandler

    class BeforeBlocks(LexicalHandler):
        def first_window_id(self, conn, document_row, rebuild=False):
            return None  # the next rowid, whatever the project

    block = 1 << PROJECT_BLOCK_BITS
    others = (ExactHandler(), StructuralHandler(), SemanticQueueHandler())
    path, old, new = tmp_path / "a.db", "/work/old-a", "/work/old-b"
    with Archive.open(path, handlers=(others[0], BeforeBlocks(), *others[1:])) as archive:
        for n in range(8):  # the two projects' sessions alternate
            archive.admit({**doc(f"s{n}", ("user", f"alpha note {n}")), "project": old if n % 2 else new})
        assert archive.conn.execute("SELECT max(id) FROM windows").fetchone()[0] == 8
    with Archive.open(path) as archive:
        for n in range(8, 12):
            archive.admit({**doc(f"s{n}", ("user", f"alpha note {n}")), "project": old if n % 2 else new})
        archive.admit({**doc("f", ("user", "alpha in a project begun after blocks")), "project": "/work/fresh"})
        ids = dict(
            archive.conn.execute(
                "SELECT p.identity, max(w.id) FROM windows AS w JOIN documents AS d ON d.id = w.document_row JOIN projects AS p ON p.id = d.project_id GROUP BY p.identity"
            )
        )
        assert ids[old] < block and ids[new] < block  # still one after another, in block 0
        assert ids["/work/fresh"] > 2 * block  # its own block (project row 3: block 2)
        spans = lambda: sorted(archive.conn.execute(SPANS).fetchall())  # noqa: E731
        assert spans() == sorted(archive.conn.execute(TRUE_SPANS).fetchall())

        def found(project: str) -> int:
            request = {"project": project, "query": "alpha", "limit": 20, "leaseSeconds": 0, "semanticPolicy": "never"}
            return len(archive.search(request)["results"])

        assert (found(old), found(new), found("/work/fresh")) == (6, 6, 1)
        ranges = lambda: next(c for c in archive.call("doctor", {})["checks"] if c["name"] == "window-ranges")  # noqa: E731
        assert ranges()["ok"] and ranges()["shared"] == 2  # searched right, but over each other's windows
        archive.call("index-rebuild", {})
        assert ranges()["ok"] and ranges()["shared"] == 0
        assert spans() == sorted(archive.conn.execute(TRUE_SPANS).fetchall())
        assert {p: (low >> PROJECT_BLOCK_BITS, high - low + 1) for p, low, high in spans()} == {
            new: (0, 6),  # project row 1: block 0, now its windows alone
            old: (1, 6),
            "/work/fresh": (2, 1),
        }
        assert (found(old), found(new), found("/work/fresh")) == (6, 6, 1)


def test_a_scope_s_counts_are_taken_within_its_window_range_and_stop_at_a_tenth_of_it(tmp_path, monkeypatch):
    from cwa.retrieve import context
    from cwa.retrieve.context import frequencies, make_context, scope_frequencies
    from cwa.retrieve.scope import resolve_scope

    with Archive.open(tmp_path / "a.db") as archive:
        for n in range(100):  # "beta" in 5 of this project's windows, "alpha" in all of them
            archive.admit(doc(f"s{n}", ("user", f"alpha note {n}" + (" beta" if n % 20 == 0 else ""))))
        for n in range(300):  # another project's, after them: "beta" in every one
            archive.admit({**doc(f"o{n}", ("user", f"beta crate {n}")), "project": "/work/other"})

        def counts(project: str | None, words: list[str]) -> tuple[dict[str, int], int]:
            scope = resolve_scope(archive.conn, "project" if project else "all", project, None, "all")
            return scope_frequencies(make_context(archive.conn, scope, [], "2026-12-01T00:00:00Z", None), words)

        assert counts(P, ["alpha", "beta", "gamma"]) == ({"alpha": 11, "beta": 5, "gamma": 0}, 100)
        archive_wide = frequencies(
            make_context(
                archive.conn, resolve_scope(archive.conn, "all", None, None, "all"), [], "2026-12-01T00:00:00Z", None
            ),
            ["alpha", "beta"],
        )
        assert archive_wide == ({"alpha": 100, "beta": 305}, 400)
        assert counts(None, ["alpha", "beta"]) == archive_wide  # every project: the archive's counts
        assert counts("/work/other", ["alpha", "beta"]) == ({"alpha": 0, "beta": 31}, 300)
        # one more of this project's after the other's: its range is still its own windows (its block)
        archive.admit(doc("s100", ("user", "alpha note again")))
        assert counts(P, ["alpha", "beta"]) == ({"alpha": 11, "beta": 5}, 101)
        # a range holding most of the archive (here: three quarters) is counted as the archive
        monkeypatch.setattr(context, "WHOLE_ARCHIVE_SHARE", 0.7)
        assert counts("/work/other", ["alpha", "beta"]) == ({"alpha": 101, "beta": 305}, 401)


def test_the_postings_budget_counts_what_fts5_walks_within_the_project_s_range(tmp_path, monkeypatch):
    # "mango" is in a third of the archive but in one window of this project: within the project's
    # range it fits the budget beside "kiwi", so it counts in BM25 and its window ranks first.
    from cwa.retrieve import search as searching

    monkeypatch.setattr(searching, "POSTINGS_BUDGET", 60)
    with Archive.open(tmp_path / "a.db") as archive:
        for n in range(15):
            archive.admit(doc(f"s{n}", ("user", f"kiwi note {n}")))
        both = archive.admit(doc("s15", ("user", "kiwi mango basket")))  # as long, and newer
        for n in range(250):
            text = f"mango crate {n}" if n % 5 < 2 else f"plain crate {n}"
            archive.admit({**doc(f"o{n}", ("user", text)), "project": "/work/other"})
        request = {"project": P, "query": "kiwi mango", "limit": 5, "leaseSeconds": 0, "semanticPolicy": "never"}
        found = archive.search({**request, "ranker": "fused"})["results"]
        assert found[0]["documentId"] == both["documentId"]
        # Counted across the archive (every project's mango), mango is left out of the MATCH: the
        # window ties with the kiwi notes and the oldest comes first.
        monkeypatch.setattr(searching, "_postings", lambda ctx, wanted, df, total: (df, total))
        found = archive.search({**request, "ranker": "fused"})["results"]
        assert found[0]["documentId"] != both["documentId"]


def test_common_everyday_words_fetch_no_window_while_the_query_has_a_content_word(db_path):
    """A question's phrasing ("how many", "try again") is no reason to fetch a window: in a long
    history such words are in thousands, and their postings filled the pool with windows that share
    nothing else with it. They still count in each candidate's matched terms; one that is rare in
    the scope ("May" among a few dates) still fetches, and a query of everyday words alone is
    searched by them."""
    with Archive.open(db_path) as archive:
        backup = archive.admit(doc("s", ("assistant", "The backup job retries five times, then pages the on-call.")))
        phrasing = {
            archive.admit(doc("t", ("user", f"How many tabs should I keep open? Try again later, round {n}.")))[
                "documentId"
            ]
            for n in range(12)
        }
        beta = archive.admit(doc("u", ("user", "The beta goes out in May.")))["documentId"]
        question = "How many times will the backup job try again?"
        for ranker in ("learned", "fused"):
            asked = {"ranker": ranker, "semanticPolicy": "never", "expansion": False}
            found = search(archive, question, **asked)
            assert [r["documentId"] for r in found] == [backup["documentId"]]
            assert found[0]["matchedTerms"] == ["time", "backup", "job"]
            assert beta in {r["documentId"] for r in search(archive, "Which release ships in May?", **asked)}
        alone = search(archive, "how many again", ranker="fused", expansion=False, semanticPolicy="never")
        assert alone and {r["documentId"] for r in alone} <= phrasing


def test_a_window_whose_own_text_answers_is_not_crowded_out_by_context_matches(tmp_path, monkeypatch):
    # A history on one subject: thirty short replies follow long requests that end with two of
    # the query's words, so each reply's context field holds them beside the third in its own
    # text; BM25F ranks all thirty above the one long answer that holds all three words itself.
    # In a long history (here: the threshold lowered to this archive's size) that answer, weighed
    # by its own text apart, is among the results; in a short one BM25F's order stands.
    import random

    from cwa.retrieve import search as searching

    rng = random.Random(5)
    filler = [f"w{n}" for n in range(400)]

    def prose(count: int) -> str:
        return " ".join(rng.choice(filler) for _ in range(count))

    with Archive.open(tmp_path / "a.db") as archive:
        for n in range(30):
            session = f"s{n}"
            archive.admit(
                doc(session, ("user", f"{prose(120)} ferrule tang"), at=f"2026-11-{1 + n % 28:02d}T10:00:00Z")
            )
            archive.admit(doc(session, ("assistant", f"quillon {prose(3)}"), at=f"2026-11-{1 + n % 28:02d}T10:01:00Z"))
        answer = archive.admit(
            doc("s99", ("assistant", f"{prose(60)} the quillon sits above the ferrule and the tang {prose(60)}"))
        )["documentId"]

        def found(ranker: str) -> list[str]:
            request = {"project": P, "query": "quillon ferrule tang", "limit": 10, "ranker": ranker}
            return [r["documentId"] for r in archive.search({**request, "leaseSeconds": 0})["results"]]

        windows = archive.conn.execute("SELECT count(*) FROM windows").fetchone()[0]
        assert windows < searching.LONG_HISTORY_WINDOWS
        assert answer not in found("fused")
        monkeypatch.setattr(searching, "LONG_HISTORY_WINDOWS", windows)
        for ranker in ("fused", "learned"):
            assert answer in found(ranker), ranker


def test_own_or_context_keeps_the_best_own_text_match_beside_the_best_overall():
    from cwa.retrieve.search import _own_or_context

    # (window, BM25F, BM25F without the context field)
    scored = [(1, 10.0, 0.5), (2, 9.0, 0.3), (3, 4.0, 4.0), (4, 3.0, 1.0)]
    assert _own_or_context(scored, 2) == {1: 10.0, 3: 10.0}
    assert list(_own_or_context(scored, 4)) == [1, 3, 2, 4]
    # no own-text match at all: BM25F's order, unchanged
    assert _own_or_context([(5, 2.0, 0.0), (6, 1.0, 0.0)], 1) == {5: 2.0}


def _turns_in_order(archive: Archive) -> Callable[..., str]:
    """`admit(text, role="user")`: a one-message turn a few hours after the previous one, 25 to a
    session; returns its document id."""
    count = 0

    def admit(text: str, role: str = "user") -> str:
        nonlocal count
        count += 1
        request = {
            "project": P,
            "sessionId": f"s{count // 25}",
            "kind": "turn",
            "createdAt": f"2026-{1 + count // 200:02d}-{1 + count % 200 // 8:02d}T{count % 8 + 9:02d}:00:00Z",
            "messages": [{"role": role, "text": text}],
        }
        return archive.admit(request)["documentId"]

    return admit


SCHEDULER_MENTIONS = (
    "Looked at the report scheduler logs for run {n}; nothing unusual.",
    "The report scheduler test {n} passes again.",
    "Reviewed the report scheduler settings in ticket {n}.",
    "Report scheduler run {n} finished in time.",
    "Paired on the report scheduler dashboard, item {n}.",
)


def test_a_question_about_the_latest_state_finds_the_statement_that_changed_it(tmp_path):
    """In a history on one subject, "what does X run on these days" shares only X with the
    statement that changed it, among hundreds of X's shorter mentions: the subject's windows that
    state a change join the pool, and the ranker puts the change in the top 10 (before it,
    neither statement about X was there)."""
    rng = random.Random(5)
    with Archive.open(tmp_path / "archive.db") as archive:
        admit = _turns_in_order(archive)
        admit("For the report scheduler, let's go with cron on the old host.")
        for n in range(250):
            admit(rng.choice(SCHEDULER_MENTIONS).format(n=n))
        changed = admit("Cron no longer drives the report scheduler; a queue worker does it instead.")
        for n in range(250, 330):
            admit(rng.choice(SCHEDULER_MENTIONS).format(n=n))
        query = "What does the report scheduler run on these days?"
        found = archive.search({"project": P, "query": query, "semanticPolicy": "never", "limit": 10})
        assert changed in [r["documentId"] for r in found["results"]]


RELEASE_MENTIONS = (
    ("Looked at the release notes draft for build {n}; nothing unusual.", "user"),
    ("The release notes check {n} passes again.", "assistant"),
    ("I would rather keep the release notes preview open for ticket {n}.", "assistant"),
    ("Release notes for build {n} are published.", "user"),
    ("Paired on the release notes page, item {n}.", "assistant"),
)


def test_a_question_about_what_the_user_said_they_like_finds_their_own_statement(tmp_path):
    """ "What is my stance on X" shares only X with the user's own statement of a preference,
    among hundreds of X's shorter mentions (the assistant's with a preference's words too): the
    subject's windows whose user text holds such words join the pool, and the statement reaches the
    top 10 (before it, it was not there)."""
    rng = random.Random(3)
    with Archive.open(tmp_path / "archive.db") as archive:
        admit = _turns_in_order(archive)

        def mention(n: int) -> None:
            text, role = rng.choice(RELEASE_MENTIONS)
            admit(text.format(n=n), role)

        for n in range(200):
            mention(n)
        stated = admit(
            "About the release notes for the mobile app and the web client: I'd rather we keep one "
            "short line per change, newest first, and leave the ticket numbers out of them."
        )
        for n in range(200, 330):
            mention(n)
        query = "What is my stance on the release notes?"
        found = archive.search({"project": P, "query": query, "semanticPolicy": "never", "limit": 10})
        assert stated in [r["documentId"] for r in found["results"]]


BILLING_MENTIONS = (
    "Looked at the billing export logs for run {n}; nothing unusual.",
    "The billing export test {n} passes again.",
    "Reviewed the billing export settings in ticket {n}.",
    "Billing export run {n} finished in time, the stall alarm stayed quiet.",
    "Paired on the billing export dashboard, item {n}.",
)


def test_a_question_about_how_a_problem_was_solved_finds_the_statement_of_the_fix(tmp_path):
    """ "How did we fix the stalls in X" shares only X with the message that fixed them, which names
    the cause and the remedy, among hundreds of X's shorter mentions (some of the stalls' own
    word): the subject's windows that hold a fix's words join the pool, and the fix reaches the
    top 10 (before it, it was not there)."""
    rng = random.Random(7)
    with Archive.open(tmp_path / "archive.db") as archive:
        admit = _turns_in_order(archive)
        for n in range(200):
            admit(rng.choice(BILLING_MENTIONS).format(n=n))
        admit("The billing export stalls again: the job hangs for minutes at the end of every run.")
        fixed = admit(
            "Found it: the billing export held a connection open across the upload, and the pool ran "
            "dry. The root cause is that early return; I moved the release into a finally block.",
            role="assistant",
        )
        for n in range(200, 330):
            admit(rng.choice(BILLING_MENTIONS).format(n=n))
        query = "How did we fix the stalls in the billing export?"
        found = archive.search({"project": P, "query": query, "semanticPolicy": "never", "limit": 10})
        assert fixed in [r["documentId"] for r in found["results"]]
