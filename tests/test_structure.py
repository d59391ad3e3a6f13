"""Structural cues are a pure function of the messages: a table of cases."""

from __future__ import annotations

import pytest

from cwa.index.structure import CUE_THRESHOLD, MessageView, score_messages

CASES = [
    ("user", "What is the file layout of the project?", {"question"}),
    ("user", "why does the build fail on arm64", {"question"}),
    ("user", "Please add a test for the retry policy", {"request"}),
    ("user", "Can you rename parse_config to load_config?", {"question", "request"}),
    ("user", "No, use exponential backoff instead.", {"correction", "request"}),
    ("user", "Actually, keep the old behaviour", {"correction", "request"}),
    ("user", "That's not what I asked for", {"correction", "request"}),
    ("user", "No problem, thanks!", set()),
    ("user", "Not sure it matters", set()),
    ("user", "Thanks, that works.", set()),
    ("user", "Decision: we ship on Friday", {"decision"}),
    ("assistant", "We decided to keep SQLite for the archive.", {"decision"}),
    ("toolResult", "No such file or directory? wrong path", set()),
]


@pytest.mark.parametrize("role, text, expected", CASES, ids=[c[1][:30] for c in CASES])
def test_cues_for_single_messages(role, text, expected):
    (cues,) = score_messages("turn", [MessageView(role, text)])
    assert {cue for cue, score in cues.items() if score >= CUE_THRESHOLD} == expected


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("What is the file layout of the project?", True),
        ("I went running. How about you?  \n", True),
        ("Did you go? " + "Anyway, we drove home and cooked dinner. " * 5, False),  # an aside long before the end
        ("We shipped the fix.", False),
    ],
)
def test_a_text_that_ends_asking_a_question(text, asks):
    from cwa.index.structure import asks_question

    assert asks_question(text) is asks


def test_answers_are_replies_to_a_user_message_in_the_same_document():
    scored = score_messages(
        "turn",
        [
            MessageView("assistant", "Here is the plan."),
            MessageView("user", "Why?"),
            MessageView("assistant", "Because the cache is cold."),
        ],
    )
    assert scored[0].get("answer", 0) < CUE_THRESHOLD
    assert scored[2]["answer"] >= CUE_THRESHOLD


def test_every_message_of_a_decision_document_is_a_decision():
    scored = score_messages("decision", [MessageView("custom", "RetryPolicy backs off exponentially")])
    assert scored == [{"decision": 1.0}]


LONG_CASES = [  # the phrase past a message's opening, where only the scan of the whole text finds it
    ("user", "Here is the log again. I meant the staging server.", {"correction", "request"}),
    ("user", "Here is the log again. İ MEANT the staging server.", {"correction", "request"}),
    ("user", "Here is the log again; ı said staging.", {"correction", "request"}),
    ("user", "Here is the log again, instead, a misunderstanding of mine.", set()),
    ("assistant", "After the review WE AGREED to keep the queue.", {"decision"}),
    ("assistant", "After the review we decıded to keep the queue.", {"decision"}),
    ("assistant", "After the review the deciſion is final.", {"decision"}),
    ("assistant", "After the review we went with the queue.", set()),
]


@pytest.mark.parametrize("role, text, expected", LONG_CASES, ids=[c[1][23:50] for c in LONG_CASES])
def test_corrections_and_decisions_said_anywhere_in_a_message(role, text, expected):
    (cues,) = score_messages("turn", [MessageView(role, text)])
    assert {cue for cue, score in cues.items() if score >= CUE_THRESHOLD} == expected


def test_corrections_and_decisions_are_found_as_one_pattern_scanning_the_whole_text_finds_them():
    """`corrects` and `decides` skip the scan of a text that holds none of its phrases' words: they
    must answer as the one pattern each was before, in every case re.I folds."""
    import random
    import re

    from cwa.index.structure import corrects, decides

    correction = re.compile(
        r"^\s*(no\b(?![\s,]+(problem|worries|thanks|rush|need|idea))|nope\b|wrong\b|actually\b|instead\b|"
        r"not\s(?!sure\b)|don'?t\b|do not\b|stop\b|undo\b|revert\b|"
        r"that'?s (not|wrong)|that is (not|wrong)|wait\b)"
        r"|\b(instead of|i said|i meant|not what i|you misunderstood|that'?s incorrect)\b",
        re.I,
    )
    decision = re.compile(
        r"^\s*decision\s*:|\b(we decided|we'?ll go with|let'?s go with|decided to|the decision is|"
        r"we agreed|agreed to)\b",
        re.I,
    )
    pieces = [
        "instead of", "i said", "I Meant", "not what i", "you misunderstood", "that's incorrect", "thats incorrect",
        "we decided", "we'll go with", "lets go with", "decided to", "the decision is", "we agreed", "agreed to",
        "no", "wait", "Decision:", "decision", "agreed", "said", "meant", "go", "with", "the", "we", "xi",
    ]  # fmt: skip
    spellings = {"i": ["i", "I", "ı", "İ"], "s": ["s", "S", "ſ"], "k": ["k", "K", "\u212a"]}
    rng = random.Random(7)
    found = {"correction": 0, "decision": 0}
    for _ in range(4000):
        words = [rng.choice(pieces) for _ in range(rng.randint(1, 6))]
        text = rng.choice(["", " ", "x "]) + rng.choice([" ", ", ", "_", ""]).join(words)
        text = "".join(rng.choice(spellings.get(c.lower(), [c])) if rng.random() < 0.3 else c for c in text)
        assert corrects(text) is bool(correction.search(text)), text
        assert decides(text) is bool(decision.search(text)), text
        found["correction"] += corrects(text)
        found["decision"] += decides(text)
    assert min(found.values()) > 400  # both ways of answering were met many times
