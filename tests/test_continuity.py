"""The continuity policy and message intent as pure functions: thresholds, reason codes, spans."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cwa.retrieve.continuity import REASONS, Evidence, Policy, decide, weighed_share
from cwa.retrieve.hint_text import marker_spans, render_marker, render_snippet
from cwa.retrieve.intent import (
    about_asking,
    answer_unit_words,
    current_state_only,
    general_knowledge,
    historical_intent,
)
from cwa.tokens import estimate_tokens

POLICY = Policy({"ephemeral": 7, "conversation": 30, "derived": 30})


def lexical(source=1, score=0.7, coverage=1.0, max_idf=0.9, terms=(("tablet", 0.9), ("help", 0.7)), **extra):
    return Evidence(
        source,
        "lexical",
        score,
        coverage,
        max_idf,
        extra.pop("kind", "turn"),
        extra.pop("retention_class", "conversation"),
        extra.pop("age_days", 3.0),
        terms=terms,
        **extra,
    )


def exact(source=1, score=0.9, anchors=("src/app.py",), coverage=1.0, **extra):
    return Evidence(
        source,
        "exact",
        score,
        coverage,
        1.0,
        extra.pop("kind", "turn"),
        extra.pop("retention_class", "conversation"),
        extra.pop("age_days", 3.0),
        anchors=anchors,
        **extra,
    )


@pytest.mark.parametrize(
    "message",
    [
        "What did we decide about the tablets?",
        "why did we pick SQLite over Postgres",
        "remind me what the retry budget was",
        "How did we fix the flaky login test last time?",
        'you said "use the blue theme everywhere", right?',
        "as we discussed, tablets for checkout",
        "what was decided about the awning?",
        "let's go back to our previous discussion about tablets",
        "Earlier you suggested a price for the oat latte",
    ],
)
def test_historical_wording(message):
    assert historical_intent(message)


@pytest.mark.parametrize(
    "message",
    ["could tablets help here?", "add tablets to checkout", "tablets for the pastry counter", "What is a mutex?"],
)
def test_no_historical_wording(message):
    assert not historical_intent(message)


@pytest.mark.parametrize(
    "message",
    [
        "what does src/cart/totals.py contain now?",
        "Do the tests pass right now?",
        "are the integration tests still failing?",
        "what branch am I on?",
        "show me the current diff",
        "is the server running?",
        "where is parseConfig defined?",
        "what does parseConfig do?",
        "Is computeTotal still returning cents?",
        "what version of node is installed?",
    ],
)
def test_current_state_questions(message):
    assert current_state_only(message)


@pytest.mark.parametrize(
    "message",
    [
        "could tablets help here?",
        "Now could tablets help?",
        "what do we do about tablets?",
        "What did the tests print last time?",
    ],
)
def test_not_current_state(message):
    assert not current_state_only(message)


@pytest.mark.parametrize(
    "message",
    [
        "What is a mutex?",
        "Explain how TCP handshakes work",
        "what is idempotency?",
        "How does a B-tree work?",
        "what's the difference between a process and a thread?",
    ],
)
def test_general_knowledge(message):
    assert general_knowledge(message)


@pytest.mark.parametrize(
    "message",
    [
        "what is the plan?",
        "What is E1043?",
        "how does our retry logic work?",
        "what is parse_config in src/app.py?",
        "could tablets help here?",
    ],
)
def test_not_general_knowledge(message):
    assert not general_knowledge(message)


@pytest.mark.parametrize(
    ("message", "units"),
    [
        ("On which day did we first run into the bad date parsing?", ("day",)),
        ("What year did Mel move to Oslo?", ("year",)),
        ("In which month's game did John score most?", ("month",)),
        ("Which dates were picked for the offsite?", ("date",)),
        ("what date format do we use?", ()),  # the subject, not the answer's unit
        ("what time zone is the server in?", ()),
        ("was the stall busy all day?", ()),
        ("When did the retry test first fail?", ()),
    ],
)
def test_the_unit_a_question_wants_its_answer_in(message, units):
    assert answer_unit_words(message) == units


def test_snippet_needs_intent_strength_and_a_margin_over_005():
    message = "what did we decide about tablets?"
    top = lexical(score=0.80)
    assert decide(message, [top, lexical(source=2, score=0.74)], POLICY).outcome == "historical-snippet"
    tied = decide(message, [top, lexical(source=2, score=0.75)], POLICY)
    assert (tied.outcome, tied.reason) == ("suppress", "ambiguous-snippet")
    # a rival of the other mode does not make it ambiguous
    assert decide(message, [top, exact(source=3, score=0.8)][::-1][1:], POLICY).outcome == "historical-snippet"
    # a weak exact hit ranked first does not hide a strong lexical one
    assert decide(message, [exact(source=5, score=0.6, anchors=("30 s",)), top], POLICY).chosen.source == 1
    # one anchor in two sources: the one holding more of the message's words wins when clearly so
    anchor = "what did we fix about TypeError last time?"
    assert decide(anchor, [exact(coverage=1.0), exact(source=2, coverage=0.5)], POLICY).outcome == "historical-snippet"
    assert decide(anchor, [exact(coverage=1.0), exact(source=2, coverage=0.95)], POLICY).reason == "ambiguous-snippet"
    weak = decide(message, [lexical(score=0.45, terms=(("tablet", 0.7),), coverage=1.0, max_idf=0.7)], POLICY)
    assert weak.reason == "weak-evidence"


def test_a_snippet_needs_its_share_of_the_rankers_probability():
    """A strong lexical candidate clear of its rivals is shown only when it holds at least
    `snippet_min_share` of the lexical candidates' learned probability (SNIPPET_MIN_SHARE, 0.6)."""
    message = "what did we decide about tablets?"
    top, rival = lexical(score=0.8, probability=0.55), lexical(source=2, score=0.6, probability=0.45)
    assert decide(message, [top, rival], POLICY).reason == "ambiguous-snippet"
    assert decide(message, [replace(top, probability=0.7), replace(rival, probability=0.3)], POLICY).outcome == (
        "historical-snippet"
    )
    assert decide(message, [top, rival], replace(POLICY, snippet_min_share=0.5)).outcome == "historical-snippet"


def test_a_word_no_other_window_of_a_long_history_holds_makes_a_lexical_candidate_strong():
    """A source holding a word of the message no other window of a long history holds (preflight
    sets `unique_word`) and at least UNIQUE_WORD_COVERAGE of the message is strong, whatever its
    score; without such a word, or with less of the message, it is not."""
    message = "remind me what we said about the Zettlepay readers at the stall"
    unique = lexical(score=0.2, coverage=0.5, max_idf=1.0, terms=(("zettlepay", 1.0), ("stall", 0.5)), unique_word=True)
    assert decide(message, [unique], POLICY).outcome == "historical-snippet"
    assert decide(message, [replace(unique, unique_word=False)], POLICY).reason == "weak-evidence"
    assert decide(message, [replace(unique, coverage=0.4)], POLICY).reason == "weak-evidence"
    # still only with a margin over its rivals
    rival = lexical(source=2, score=0.18, coverage=0.5, max_idf=0.7)
    assert decide(message, [unique, rival], POLICY).reason == "ambiguous-snippet"


def test_a_source_asking_the_question_is_not_its_answer():
    """A lexical source most of whose matched words are in the question it ends with (preflight
    sets `asks`) is never a snippet's source, nor a rival to one that answers; unless the message
    is about what was asked."""
    message = "remind me how we keep the tablet sync from dropping orders"
    asking, answer = lexical(source=1, score=0.85, asks=True), lexical(source=2, score=0.7)
    assert decide(message, [asking], POLICY).outcome != "historical-snippet"
    shown = decide(message, [asking, answer], POLICY)
    assert (shown.outcome, shown.chosen.source) == ("historical-snippet", 2)
    recalled = decide("remind me what I asked about the tablet sync", [asking, answer], POLICY)
    assert (recalled.outcome, recalled.chosen.source) == ("historical-snippet", 1)
    # a question put now is not one about what was asked
    quick = decide(
        "Quick question: remind me how we keep the tablet sync from dropping orders", [asking, answer], POLICY
    )
    assert (quick.outcome, quick.chosen.source) == ("historical-snippet", 2)


@pytest.mark.parametrize(
    ("message", "about"),
    [
        ("what did I ask about the budget?", True),
        ("remind me what I asked about the tablet sync", True),
        ("which question did Caroline answer?", True),
        ("the question I asked: could tablets help?", True),
        ("do you remember my earlier question about Postgres?", True),
        ("What did Caroline ask Melanie about?", True),
        ("quick question: how did we fix the sync?", False),
        ("I have a question about the retry policy", False),
        ("can I ask how we fixed the sync?", False),
        ("my question is how we fix it", False),
        ("One more question - what port did we pick?", False),
    ],
)
def test_a_message_about_what_was_asked(message, about):
    """Only wording about a question asked earlier makes a source's own question the one wanted."""
    assert about_asking(message) is about


def test_a_question_about_how_a_problem_was_solved_gets_no_snippet_of_a_source_that_states_no_fix():
    message = "how did we fix the tablet sync last time?"
    assert decide(message, [lexical(states_fix=True)], POLICY).outcome == "historical-snippet"
    unanswered = decide(message, [lexical(states_fix=False)], POLICY)
    assert (unanswered.outcome, unanswered.reason) == ("suppress", "unanswered-fix")
    # not asked (the message has no fix cue): no such check
    assert decide("what did we decide about tablets?", [lexical()], POLICY).outcome == "historical-snippet"
    assert "unanswered-fix" in REASONS


def test_marker_thresholds():
    message = "could tablets help here?"
    assert (
        decide(message, [lexical(coverage=0.6, max_idf=0.6, terms=(("tablet", 0.6), ("help", 0.5)))], POLICY).outcome
        == "continuity-marker"
    )
    for weaker in (
        lexical(coverage=0.59),
        lexical(max_idf=0.59, terms=(("tablet", 0.59), ("help", 0.5))),
        lexical(terms=(("tablet", 0.79),), max_idf=0.79),
    ):
        assert decide(message, [weaker], POLICY).reason == "weak-evidence"
    # one content term the earlier conversation returned to counts as two matched terms
    recurring = lexical(terms=(("tablet", 0.9),), occurrences=2)
    assert decide(message, [recurring], POLICY).outcome == "continuity-marker"
    # matched once, the message's only content word must be rare
    assert decide(message, [replace(recurring, occurrences=1)], POLICY).outcome == "continuity-marker"
    common = replace(recurring, occurrences=1, terms=(("tablet", 0.7),), max_idf=0.7)
    assert decide(message, [common], POLICY).reason == "weak-evidence"
    # an exact anchor backs a marker, a bare value ("30 s") does not
    assert decide("backoff of 30 s?", [exact(anchors=("30 s",), score=0.6)], POLICY).reason == "weak-evidence"
    assert decide("src/app.py again", [exact()], POLICY).outcome == "continuity-marker"
    # a pair tied on score still supports a marker (no ranker probabilities to prefer either), and
    # both sources stand behind it
    pair = decide(message, [lexical(source=1), lexical(source=2)], POLICY)
    assert pair.outcome == "continuity-marker" and pair.supporting == (1, 2)


def test_a_marker_stands_on_a_source_the_ranker_prefers():
    """A lexical marker's source holds at least MARKER_MIN_SHARE of the lexical candidates'
    learned probability: where none is preferred the concept is spread over several sources and
    the marker says nothing (`ambiguous-marker`); the preferred one's rivals sharing its words
    still stand behind it. Exact anchors are not weighed so."""
    message = "could tablets help here?"
    split = [lexical(source=1, probability=0.5), lexical(source=2, probability=0.5)]
    ambiguous = decide(message, split, POLICY)
    assert (ambiguous.outcome, ambiguous.reason, ambiguous.chosen.source) == ("suppress", "ambiguous-marker", 1)
    assert "ambiguous-marker" in REASONS
    preferred = decide(message, [lexical(source=1, probability=0.3), lexical(source=2, probability=0.7)], POLICY)
    assert (preferred.outcome, preferred.chosen.source, preferred.supporting) == ("continuity-marker", 2, (1, 2))
    assert decide(message, split, replace(POLICY, marker_min_share=0.5)).outcome == "continuity-marker"
    assert decide("could src/app.py help here?", [exact(), *split], POLICY).outcome == "continuity-marker"
    # a rival that could not back a marker itself still counts against the share
    rival = lexical(source=2, probability=0.6, coverage=0.3)
    assert decide(message, [lexical(source=1, probability=0.4), rival], POLICY).reason == "ambiguous-marker"


def test_a_marker_stands_on_the_reply_not_on_the_question_it_answered():
    """As for a snippet, a source asking what the message asks is no marker's source and no share
    of the ranker's probability; it still stands behind the reply's marker. Asked about what was
    asked, the message may have its marker on the question."""
    message = "could tablets help with the sync?"
    asking, reply = lexical(source=1, probability=0.55, asks=True), lexical(source=2, probability=0.45)
    marked = decide(message, [asking, reply], POLICY)
    assert (marked.outcome, marked.chosen.source, marked.supporting) == ("continuity-marker", 2, (1, 2))
    alone = decide(message, [asking], POLICY)
    assert (alone.outcome, alone.reason) == ("suppress", "ambiguous-marker")
    asked = decide("the question I asked: could tablets help?", [replace(asking, probability=0.7), reply], POLICY)
    assert (asked.outcome, asked.chosen.source) == ("continuity-marker", 1)


def test_the_share_reported_is_the_one_weighed():
    """Among the candidates that may answer and the chosen one, counted once even as a copy that
    knows one more fact (preflight's fix check)."""
    message = "how do we keep the tablet sync from dropping orders?"
    asking = lexical(source=1, probability=0.5, asks=True)
    reply, other = lexical(source=2, probability=0.3), lexical(source=3, probability=0.1)
    assert weighed_share(message, reply, [asking, reply, other]) == pytest.approx(0.75)
    assert weighed_share(message, replace(reply, states_fix=True), [asking, reply, other]) == pytest.approx(0.75)
    assert weighed_share(message, asking, [asking, reply, other]) == pytest.approx(0.5 / 0.9)  # itself, though it asks


def test_marker_spans_are_the_messages_own_specific_words():
    message = "Could TABLETS help here, with tablets?"
    decision = decide(message, [lexical(terms=(("could", 0.9), ("tablet", 0.9), ("help", 0.8), ("here", 0.2)))], POLICY)
    assert decision.spans == ("TABLETS",)
    assert marker_spans(render_marker(decision.spans)) == ["TABLETS"]
    anchored = decide('the "inventory_sync.py" job', [exact(anchors=("inventory_sync.py", 'evil"quote'))], POLICY)
    assert anchored.spans == ("inventory_sync.py",)


@pytest.mark.parametrize(
    ("evidence", "reason"),
    [
        (lexical(visible=True), "already-visible"),
        (lexical(superseded=True), "superseded-source"),
        (lexical(age_days=31), "source-ineligible"),
        (lexical(kind="tool-result", retention_class="ephemeral", age_days=8), "source-ineligible"),
        (
            lexical(kind="tool-result", retention_class="ephemeral", age_days=2),
            "source-ineligible",
        ),  # no marker from tools
        (lexical(retention_class="durable"), "source-ineligible"),
        (lexical(kind="manual", retention_class="conversation"), "source-ineligible"),
        (lexical(recently_surfaced=True), "recently-surfaced"),
    ],
)
def test_blocked_sources_name_their_reason(evidence, reason):
    decision = decide("could tablets help here?", [evidence], POLICY)
    assert (decision.outcome, decision.reason) == ("suppress", reason)
    assert reason in REASONS


def test_a_blocked_best_match_lets_a_strong_runner_up_through():
    decision = decide(
        "what did we decide about tablets?", [lexical(source=1, superseded=True), lexical(source=2)], POLICY
    )
    assert decision.outcome == "historical-snippet" and decision.chosen.source == 2


def test_message_classes_come_first():
    assert decide("Do the tests pass right now?", [exact()], POLICY).reason == "current-state-required"
    assert decide("What is a mutex?", [lexical()], POLICY).reason == "general-knowledge"
    assert decide("hello", [], POLICY).reason == "no-candidate"
    assert (
        decide("what did we decide about tablets?", [lexical()], replace(POLICY, snippets=False)).outcome
        == "continuity-marker"
    )


def test_snippet_rendering_is_bounded_and_json_quoted():
    text = 'line one "quoted" \\ back\n' * 200 + "漢字🚀" * 50
    for budget in (100, 160, 400):
        rendered = render_snippet(text, len(text) // 2, "2026-11-02T10:00:00.000Z", True, budget)
        assert rendered is not None and estimate_tokens(rendered) <= budget
        assert "2026-11-02" in rendered and "tool output" in rendered
    assert render_snippet(text, 0, "2026-11-02T10:00:00.000Z", False, 40) is None


def test_hint_specificity_keeps_the_same_share_of_windows_as_the_archive_grows():
    from cwa.retrieve.calibration import (
        SPECIFICITY_REFERENCE_WINDOWS,
        most_specific_windows,
        normalized_idf,
        specificity,
    )
    from cwa.retrieve.continuity import MARKER_MIN_IDF

    # Up to the size the gates were set on, nothing changes.
    for total in (10, 600, 5_882, SPECIFICITY_REFERENCE_WINDOWS):
        for df in (1, 3, total // 50 or 1, total // 5 or 1, total):
            assert specificity(df, total) == normalized_idf(df, total)
    # Past it, a term's standing follows its share of the windows, not the archive's size: in
    # 0.4% of the windows it backs a hint at 10K, 100K and 1M windows alike, where normalized IDF
    # calls it common once the archive is large; a term in 5% never does.
    for total in (10_000, 100_000, 1_000_000):
        assert specificity(total * 4 // 1000, total) >= MARKER_MIN_IDF
        assert total // 20 > most_specific_windows(total, MARKER_MIN_IDF) >= total * 4 // 1000
        assert specificity(1, total) == 1.0
    assert normalized_idf(4_000, 1_000_000) < MARKER_MIN_IDF


def test_the_most_windows_a_term_may_be_in_is_where_its_specificity_crosses_the_threshold():
    from cwa.retrieve.calibration import most_specific_windows, specificity

    for total in [*range(1, 3_000, 7), 8_192, 20_000, 500_000, 1_000_000, 2**31]:
        for threshold in (0.45, 0.6):
            most = most_specific_windows(total, threshold)
            assert most == 0 or specificity(most, total) >= threshold
            assert specificity(most + 1, total) < threshold
    assert most_specific_windows(0, 0.6) == 0
