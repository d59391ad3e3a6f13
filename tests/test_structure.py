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
