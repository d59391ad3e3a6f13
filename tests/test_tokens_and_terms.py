"""The token estimator is conservative and deterministic; lexical terms normalize prose and code."""

from __future__ import annotations

from conftest import REPO
from hypothesis import given, settings
from hypothesis import strategies as st

from cwa.index.porter import stem
from cwa.index.terms import query_terms, terms
from cwa.tokens import estimate_tokens

PORTER_SAMPLES = {
    "caresses": "caress",
    "ponies": "poni",
    "cats": "cat",
    "agreed": "agre",
    "motoring": "motor",
    "hopping": "hop",
    "happy": "happi",
    "relational": "relat",
    "conditional": "condit",
    "digitizer": "digit",
    "operator": "oper",
    "hopefulness": "hope",
    "sensibiliti": "sensibl",
    "electrical": "electr",
    "adjustment": "adjust",
    "adoption": "adopt",
    "effective": "effect",
    "generalizations": "gener",
    "controll": "control",
    "retrying": "retri",
}


def test_porter_matches_the_published_examples():
    assert {word: stem(word) for word in PORTER_SAMPLES} == PORTER_SAMPLES


def test_porter_gives_the_stems_sqlite_fts5_gives_for_every_word_of_the_docs():
    """SQLite's own Porter tokenizer as an independent oracle, on real English: every word of the
    README and docs/. (The two differ only on runs of 'y', which neither text has.)"""
    import re

    import apsw

    words = {
        word.lower()
        for document in [REPO / "README.md", *(REPO / "docs").glob("*.md")]
        for word in re.findall(r"[A-Za-z]{3,}", document.read_text(encoding="utf-8"))
        if "yy" not in word.lower()
    }
    assert len(words) > 2000
    sqlite_porter = apsw.Connection(":memory:").fts5_tokenizer("porter", ["ascii"])
    theirs = {
        w: sqlite_porter(w.encode(), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False)[0][0] for w in words
    }
    assert {w: stem(w) for w in words} == theirs


def test_terms_for_prose_and_code():
    assert terms("The lock timeouts were retried") == ["lock", "timeout", "retri"]
    assert terms("RetryPolicy") == ["retrypolicy", "retri", "polici"]
    assert terms("run_with_retry") == ["run_with_retry", "run", "retri"]  # "with" is a stop word
    assert terms("os.path.join") == ["os", "path", "join"]
    assert terms("HTTPServer") == ["httpserver", "http", "server"]
    assert terms("a1b2c3d4e5") == ["a1b2c3d4e5"]
    assert terms("Ｆｕｌｌ ÜBER") == ["full", "über"]  # NFKC and case folding
    assert terms("日本語") == ["日", "本", "語"]


def test_query_terms_are_distinct_in_order():
    assert query_terms("retry the Retry retries") == ["retri"]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('aZ_9 .\n"\\{}é漢🚀xyzAB')), max_size=300))
def test_estimate_upper_bounds_the_lexical_term_count(text):
    assert estimate_tokens(text) >= len(terms(text))


def test_estimate_charges_opaque_identifiers_and_multibyte_text_by_byte():
    assert estimate_tokens("a1b2c3d4e5f6") == 12
    assert estimate_tokens("ERR_LOCK_TIMEOUT") == 16
    assert estimate_tokens("漢字") == 6
    assert estimate_tokens("hello world") == 4
    assert estimate_tokens('{"a": 1}') >= 7


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list('aZ_9 .\n"\\é漢🚀xyzAB')), max_size=400),
    budget=st.integers(0, 60),
    focus=st.integers(0, 400),
)
def test_fit_around_stays_within_budget_and_holds_the_focus_when_it_can(text, budget, focus):
    from cwa.tokens import fit_around

    left, right = fit_around(text, budget, focus)
    assert 0 <= left <= right <= len(text)
    assert estimate_tokens(text[left:right]) <= budget
    if estimate_tokens(text) <= budget and text:
        assert (left, right) == (0, len(text)) or estimate_tokens(text[left:right]) == estimate_tokens(text)
