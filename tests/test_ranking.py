"""Ordering inside the lexical/semantic tier: the importance prior and conversation neighbours."""

from __future__ import annotations

import pytest

from cwa.api import Archive
from cwa.errors import InvalidRequest
from cwa.retrieve.importance import CAP, prior

P = "/work/ranked"
AT = "2026-11-01T10:00:00Z"


def turn(session: str, text: str, kind: str = "turn", at: str = AT, **extra) -> dict:
    return {
        "project": P,
        "sessionId": session,
        "kind": kind,
        "createdAt": at,
        "messages": [{"role": "user" if kind == "turn" else "assistant", "text": text}],
        **extra,
    }


def search(archive, query, **extra):
    return archive.search(
        {"project": P, "query": query, "limit": 10, "semanticPolicy": "never", "expansion": False, **extra}
    )


def apart(archive, *texts: str, kind: str = "turn") -> list[str]:
    """Each text admitted in a session of its own, so no neighbour tells them apart; their ids."""
    return [archive.admit(turn(f"{kind}-{i}", text, kind=kind))["documentId"] for i, text in enumerate(texts)]


def explained_pool(archive, query) -> list[dict]:
    """The learned ranker's pool of a query, each candidate with its features (`explain`)."""
    return search(archive, query, explain=True)["ranking"]["pool"]


def feature_of(pool: list[dict], name: str) -> dict[str, float]:
    """Each pool candidate's value of one of the ranker's FEATURES, by document id."""
    from cwa.retrieve.ranker import FEATURES

    index = FEATURES.index(name)
    return {c["documentId"]: c["features"][index] for c in pool}


def ids_of(response):
    return [r["documentId"] for r in response["results"]]


@pytest.fixture
def archive(db_path):
    with Archive.open(db_path, clock=lambda: "2026-11-03T00:00:00.000Z") as opened:
        yield opened


# --- the prior itself ---------------------------------------------------------------------------


def test_prior_is_one_without_signals_and_never_above_the_cap():
    assert prior(False, False, 1, 1, 0) == 1.0
    assert 1.0 < prior(True, False, 1, 1, 0) < CAP
    assert 1.0 < prior(False, True, 1, 1, 0) < CAP
    assert prior(False, False, 3, 1, 0) > prior(False, False, 2, 1, 0) > 1.0  # supersession depth
    assert prior(False, False, 1, 8, 0) > prior(False, False, 1, 2, 0) > 1.0  # source breadth
    assert prior(False, False, 1, 1, 8) > prior(False, False, 1, 1, 1) > 1.0  # recalls
    assert prior(True, True, 50, 10_000, 10_000) == CAP == 1.15


# --- the prior in search ------------------------------------------------------------------------


def test_a_decision_wins_a_near_tie(archive):
    # a near tie of the rank fusion (the learned ranker's features separate the two by more)
    texts = [
        "Seen again: flaky upload retry on staging, after the nightly build.",
        "We keep the flaky upload retry on staging until the Friday review of all the open pipeline work.",
    ]

    def admit(project, second_kind):
        first = archive.admit({**turn("s1", texts[0]), "project": project})["documentId"]
        # another session: the second turn does not get the first's words as its context
        second = archive.admit({**turn("s2", texts[1], kind=second_kind), "project": project})["documentId"]
        found = archive.search(
            {
                "project": project,
                "query": "flaky upload retry staging",
                "limit": 10,
                "semanticPolicy": "never",
                "expansion": False,
                "ranker": "fused",
            }
        )["results"]
        assert found[0]["score"] == found[1]["score"]  # the same evidence: a near tie
        return [r["documentId"] for r in found[:2]], first, second

    order, first, second = admit("/work/plain", "turn")
    assert order == [first, second]  # as plain turns, the shorter one leads on BM25F
    order, first, second = admit("/work/decided", "decision")
    assert order == [second, first]


def test_recalls_of_a_result_lift_it_in_a_near_tie(archive):
    # a near tie of the rank fusion; the learned ranker's rank features separate these two by more
    # than the prior's 15%
    def search(archive, query):
        return archive.search(
            {
                "project": P,
                "query": query,
                "limit": 10,
                "semanticPolicy": "never",
                "expansion": False,
                "ranker": "fused",
            }
        )

    first = archive.admit(turn("s1", "Deploy notes: the canary gate compares error budgets hourly."))["documentId"]
    second = archive.admit(turn("s2", "Reminder that each canary gate reads two error budgets."))["documentId"]
    assert ids_of(search(archive, "canary gate error budgets"))[:2] == [first, second]
    for _ in range(3):  # three searches, each recalling the second result under its own lease
        result = next(r for r in search(archive, "canary gate error budgets")["results"] if r["documentId"] == second)
        assert archive.recall({"locator": result["locator"]})["status"] == "resolved"
    assert ids_of(search(archive, "canary gate error budgets"))[:2] == [second, first]
    recalls = archive.conn.execute(
        "SELECT count(*) FROM recall_feedback AS f JOIN documents AS d ON d.id = f.document_row "
        "WHERE d.document_id = ?",
        (second,),
    ).fetchone()[0]
    assert recalls == 3


def test_the_prior_never_overrules_a_clear_relevance_gap(archive):
    strong = archive.admit(turn("s1", "Postgres vacuum freeze age alarms fired on the replica."))["documentId"]
    weak = archive.admit(turn("s2", "An alarm fired somewhere.", kind="decision"))["documentId"]
    conn = archive.conn
    row = conn.execute("SELECT id FROM documents WHERE document_id = ?", (weak,)).fetchone()[0]
    conn.execute("UPDATE documents SET pinned = 1 WHERE id = ?", (row,))  # pins arrive with [lifecycle]
    for _ in range(20):
        conn.execute("INSERT INTO recall_feedback (document_row, recalled_at) VALUES (?, ?)", (row, AT))
    response = search(archive, "postgres vacuum freeze alarms replica")
    assert ids_of(response)[:2] == [strong, weak]
    assert response["results"][0]["score"] > response["results"][1]["score"]


def test_a_strong_exact_hit_stays_first_whatever_the_prior(archive):
    exact = archive.admit(turn("s1", "The failure code was ERR_QUOTA_EXCEEDED on upload."))["documentId"]
    boosted = archive.admit(turn("s1", "Upload quota exceeded errors need a decision.", kind="decision"))["documentId"]
    results = search(archive, "ERR_QUOTA_EXCEEDED upload quota")["results"]
    assert results[0]["documentId"] == exact and results[0]["matchType"].startswith("exact-")
    assert boosted in [r["documentId"] for r in results]


# --- conversation neighbours -------------------------------------------------------------------


@pytest.fixture
def dialogue(archive):
    """Two sessions; in s1 the answer to a question comes in the next turn, in other words."""
    admitted = [
        archive.admit(turn("s1", "Morning! How was the weekend?", at="2026-11-01T09:00:00Z")),
        archive.admit(turn("s1", "Who will you invite to the gaming party in June?", at="2026-11-01T09:01:00Z")),
        archive.admit(turn("s1", "Definitely my old teammates from the tournaments.", at="2026-11-01T09:02:00Z")),
        archive.admit(turn("s2", "Bought new tyres for the bike today.", at="2026-11-01T09:03:00Z")),
    ]
    return archive, [a["documentId"] for a in admitted]


def test_fused_ranking_takes_no_neighbours_by_default(dialogue):
    archive, ids = dialogue
    response = search(archive, "gaming party invite", ranker="fused")
    assert ids_of(response)[0] == ids[1]
    assert all(r["modes"] != ["neighbor"] for r in response["results"])


def test_the_learned_ranker_brings_the_reply_beside_the_hit(dialogue):
    """The reply to the question that holds the query's words joins the results (through its
    context field) beside it, the two first: since the ranker weighs a turn that asks a question
    against the one that follows it, the reply comes first."""
    archive, ids = dialogue
    response = search(archive, "gaming party invite", explain=True)
    results = response["results"]
    assert ids_of(response)[:2] == [ids[2], ids[1]]
    assert results[1]["matchedTerms"] == ["game", "parti", "invit"]
    reply = results[0]  # found through its context field
    assert reply["matchedTerms"] == [] and reply["score"] == 0.0
    assert ids[3] not in ids_of(response)
    pool = response["ranking"]
    assert pool["ranker"] == "learned" and pool["model"] == "lexical"
    probabilities = [c["probability"] for c in pool["pool"]]
    assert probabilities == sorted(probabilities, reverse=True)
    assert all(len(c["features"]) == len(pool["features"]) for c in pool["pool"])


def test_the_next_turn_joins_as_a_neighbour_without_changing_scores(dialogue):
    archive, ids = dialogue
    plain = search(archive, "gaming party invite", ranker="fused")["results"]
    response = search(archive, "gaming party invite", neighborCredit=0.5, ranker="fused")
    found = {r["documentId"]: r for r in response["results"]}
    # the hit and the reply (which its context field found) lead; the hit's score is unchanged
    assert set(ids_of(response)[:2]) == {ids[1], ids[2]}
    assert found[ids[1]]["score"] == plain[0]["score"]
    assert found[ids[0]]["modes"] == ["neighbor"] and found[ids[0]]["matchType"] == "neighbor"
    for neighbour in (ids[0], ids[2]):  # both neighbours in its session, with no evidence of their own
        assert found[neighbour]["score"] == 0.0 and found[neighbour]["matchedTerms"] == []
    assert ids[3] not in found  # another session is never a neighbour
    recalled = archive.recall({"locator": found[ids[2]]["locator"]})
    assert "old teammates" in recalled["text"]


def test_neighbours_respect_visibility(dialogue):
    archive, ids = dialogue
    key = archive.conn.execute(
        "SELECT m.message_key FROM messages AS m JOIN documents AS d ON d.id = m.document_row WHERE d.document_id = ?",
        (ids[2],),
    ).fetchone()[0]
    hidden = search(archive, "gaming party invite", neighborCredit=0.5, ranker="fused", excludeVisibleSourceKeys=[key])
    assert ids[2] not in ids_of(hidden) and ids[0] in ids_of(hidden)
    learned = search(archive, "gaming party invite", excludeVisibleSourceKeys=[key], explain=True)
    assert ids[2] not in ids_of(learned) and ids[2] not in {c["documentId"] for c in learned["ranking"]["pool"]}


def test_a_superseded_neighbour_is_skipped_for_its_successor(dialogue):
    archive, ids = dialogue
    successor = archive.admit(
        turn(
            "s1",
            "Actually: my cousins and the old teammates.",
            at="2026-11-01T09:02:00Z",
            supersedes={"documentId": ids[2], "version": 1},
        )
    )
    found = search(archive, "gaming party invite", neighborCredit=0.5, ranker="fused")["results"]
    versions = {(r["documentId"], r["version"]) for r in found}
    assert (ids[2], 1) not in versions
    assert (successor["documentId"], successor["version"]) in versions


@pytest.mark.parametrize("bad", [-0.1, 1.5, "half", True])
def test_neighbor_credit_is_validated(archive, bad):
    with pytest.raises(InvalidRequest) as raised:
        archive.search({"project": P, "query": "x", "neighborCredit": bad})
    assert raised.value.details["field"] == "neighborCredit"


def test_a_question_s_answer_words_are_a_change_s_for_the_latest_state_and_a_fix_s_for_a_solved_problem():
    from cwa.retrieve import intent
    from cwa.retrieve.intent import CHANGE_WORDS, FIX_WORDS, STANCE_WORDS

    def answer_words(question: str) -> tuple[str, ...]:
        return intent.answer_words(question, intent.time_direction(question)).anywhere

    for question in ("Which queue does the mailer use now?", "What did the mailer end up with?"):
        assert answer_words(question) == tuple(CHANGE_WORDS)
    for question in (
        "How did we fix the flaky login test?",
        "What was the root cause of the 502s?",
        "How did we get rid of the deadlock in the importer?",
        "What caused the doubled rows, and what was the repair?",
        "Did we ever resolve the memory leak?",
    ):
        assert answer_words(question) == tuple(FIX_WORDS), question
    assert answer_words("What do we use now that the crash is fixed?") == (*CHANGE_WORDS, *FIX_WORDS)
    for question in ("How does the mailer send bounces?", "Because of what did the build start?", "Fixtures?"):
        assert not intent.answer_words(question, intent.time_direction(question)), question
    # what the user said they like or require: a preference's words, in the user's own text only
    for question in (
        "What is my stance on mocking the database?",
        "Which branch naming do I prefer?",
        "What did I ask for in commit messages?",
        "How should imports be ordered, according to me?",
        "Is there a standing rule about force pushes?",
        "What's the rule for touching the prod config?",
    ):
        assert intent.answer_words(question, 0.0) == intent.AnswerWords((), tuple(STANCE_WORDS)), question
    for question in ("What does Melanie like to paint?", "Do you prefer tabs?", "How do I run the linter?"):
        assert not intent.answer_words(question, 0.0).user, question


def test_the_ranker_weighs_a_candidates_place_in_time_only_when_the_query_asks_for_latest_or_earliest(archive):
    from cwa.retrieve.intent import time_direction

    assert time_direction("Which queue does the mailer use now?") == 1.0
    assert time_direction("What did the mailer end up with?") == 1.0
    assert time_direction("When did the mailer first fail?") == -1.0
    assert time_direction("How does the mailer send bounces?") == 0.0
    ids = [
        archive.admit(turn("s1", text, at=at))["documentId"]
        for text, at in (
            ("For the mailer queue, let's use Redis.", "2026-03-01T09:00:00Z"),
            ("Mailer queue: drop Redis, use RabbitMQ instead.", "2026-06-01T09:00:00Z"),
            ("The mailer queue config lives in mailer.toml.", "2026-04-01T09:00:00Z"),
        )
    ]
    for query, place in (
        ("which mailer queue do we use now", {ids[0]: 0.0, ids[2]: 0.5, ids[1]: 1.0}),  # share of the others before it
        ("mailer queue at first", {ids[0]: 1.0, ids[2]: 0.5, ids[1]: 0.0}),  # ... after it
        ("mailer queue", dict.fromkeys(ids, -1.0)),  # no direction: time says nothing
    ):
        assert feature_of(explained_pool(archive, query), "timeFit") == place


def test_the_ranker_weighs_whether_the_query_names_the_person_speaking_in_a_turn(archive):
    """A turn of a transcript among people opens with its speaker ("Caroline: …"): a query naming
    one of the pool's speakers marks that speaker's turns 1 and the others' −1; naming none, or a
    tool's output opening "Error: …", says nothing (0). Of two turns alike but for who speaks, the
    shipped ranker prefers the one whose speaker the query names."""

    caroline, melanie = apart(
        archive,
        "Caroline: Melanie, the adoption agency interview went well.",
        "Melanie: Caroline, the adoption agency interview went well.",
    )
    (tool,) = apart(archive, "Error: adoption agency interview form failed to load", kind="tool-result")
    for query, fit in (
        ("how did Caroline's adoption agency interview go", {caroline: 1.0, melanie: -1.0, tool: 0.0}),
        ("how did Melanie's adoption agency interview go", {caroline: -1.0, melanie: 1.0, tool: 0.0}),
        ("how did the adoption agency interview go", dict.fromkeys((caroline, melanie, tool), 0.0)),
        ("the adoption agency interview error", dict.fromkeys((caroline, melanie, tool), 0.0)),
    ):
        pool = explained_pool(archive, query)
        assert feature_of(pool, "speakerFit") == fit, query
        probability = {c["documentId"]: c["probability"] for c in pool}
        if fit[caroline]:
            named, other = (caroline, melanie) if fit[caroline] > 0 else (melanie, caroline)
            assert probability[named] > probability[other], query


def test_only_a_name_written_as_one_names_a_speaker(archive):
    """A note opening "Summary: …" or "Plan: …" reads like a transcript's turn; a query names its
    "speaker" only by writing the word as a name (capitalized where no sentence opens), so a plain
    question about the summary leaves speakerFit at 0, and so does a name typed in lower case."""

    summary, plan = apart(
        archive,
        "Summary: the migration plan moves the queue to Redis streams.",
        "Plan: the migration summary goes to the queue owners.",
    )
    for query, fit in (
        ("what was the summary of the migration plan", 0.0),
        ("Summary of the migration plan?", 0.0),  # a sentence's first word is capitalized anyway
        ("what did the Summary say about the migration plan", None),  # written as a name: it counts
    ):
        found = feature_of(explained_pool(archive, query), "speakerFit")
        assert found == ({summary: 1.0, plan: -1.0} if fit is None else dict.fromkeys((summary, plan), fit)), query


def test_a_question_naming_someone_fetches_the_windows_holding_the_name(archive):
    """In a long history sixty turns share four of the question's words and crowd the BM25F pool;
    the one turn holding the name it writes and one more of its words is fetched beside them, so
    the ranker sees it (and puts it among the first: the query names its speaker). A name typed in
    lower case is no name (intent.names), and nothing fetches that turn; nor does the name in a
    short history, where the fetch is not made."""
    from cwa.retrieve.search import LONG_HISTORY_WINDOWS

    crowd = [
        f"The jazz festival on stage {i} had music everyone could enjoy, jazz and festival food alike."
        for i in range(60)
    ]
    chatter = [f"Melanie: the hike up trail {i} was steep, the dog loved it." for i in range(40)]
    notes = [f"Garden note {i}: tomatoes in bed {i % 37} need staking, water twice a week." for i in range(2_000)]
    *_, wanted = apart(
        archive, *crowd, *chatter, *notes[:100], "Melanie: we heard live music downtown, a trumpet quartet."
    )
    question = "What jazz festival music did Melanie enjoy?"
    assert wanted not in {c["documentId"] for c in explained_pool(archive, question)}
    archive.admit_many(turn(f"garden-{i}", text) for i, text in enumerate(notes[100:]))
    assert archive.conn.execute("SELECT count(*) FROM windows").fetchone()[0] >= LONG_HISTORY_WINDOWS
    assert wanted in {c["documentId"] for c in explained_pool(archive, question)}
    assert wanted in ids_of(search(archive, question))[:5]
    lower_case = question.replace("Melanie", "melanie")
    assert wanted not in {c["documentId"] for c in explained_pool(archive, lower_case)}


def test_a_name_is_a_capitalized_word_where_no_sentence_opens():
    from cwa.retrieve.intent import names

    assert names("Remind me: What did Caroline say about James' dogs?") == ("Caroline", "James'")
    assert names("Summary of the plan. Then Melanie left") == ("Melanie",)
    assert names("what did caroline say about the API and JSON?") == ()
    assert names('"Caroline said hi", she wrote') == ()


def test_the_ranker_weighs_whether_a_turn_mentions_a_time_when_the_query_asks_when(archive):
    """A question asking when something happened is answered by a statement that mentions a
    time ("last March", "on Friday", "2023"): such a candidate gets timeMention 1 and one without
    −1; a query not asking when (or using "when" as a conjunction) leaves it at 0. The shipped
    ranker gives a candidate a higher probability mentioning a time than not, all else the same."""
    from cwa.retrieve.ranker import FEATURES, load

    dated, undated = apart(
        archive,
        "We moved the mailer queue over to Redis streams last March.",
        "We moved the mailer queue over to Redis streams for the retries.",
    )
    mention = FEATURES.index("timeMention")
    for query, fit in (
        ("When did we move the mailer queue to Redis streams?", {dated: 1.0, undated: -1.0}),
        ("which month did the mailer queue move to Redis streams", {dated: 1.0, undated: -1.0}),
        ("why did we move the mailer queue to Redis streams?", {dated: 0.0, undated: 0.0}),
        ("the mailer queue broke when we moved to Redis streams", {dated: 0.0, undated: 0.0}),
    ):
        pool = explained_pool(archive, query)
        assert feature_of(pool, "timeMention") == fit, query
        if fit[dated]:
            for found in pool:
                row = list(found["features"])
                with_time, without = (tuple(row[:mention] + [value] + row[mention + 1 :]) for value in (1.0, -1.0))
                for model in load().models.values():
                    assert model.probability([with_time])[0] > model.probability([without])[0], query


def test_the_ranker_weighs_whether_a_turn_asks_a_question_or_replies_to_one(archive):
    """A turn that ends asking a question seldom holds what a question asks for; the turn after
    it, its reply, often does. asksQuestion is 1 for a candidate whose text's last paragraph asks
    (a "?" in its last 200 characters, an aside earlier does not count) and followsQuestion for
    one whose session's document just before it ends so, whatever the query. Both shipped models give a
    reply a higher probability than a question, every other feature held."""
    from cwa.retrieve.ranker import FEATURES, load

    said = [
        "Melanie: What did you make at the pottery class with the kids?",
        "Caroline: At the pottery class we made a cup with a dog face on it.",
        "Melanie: Did the kids like it? " + "The pottery class ran late, we drove home and cooked. " * 5,
        "Caroline: They loved the pottery class and want to go back.",
    ]
    ids = [archive.admit(turn("s", text, at=f"2026-11-01T10:0{i}:00Z"))["documentId"] for i, text in enumerate(said)]
    pool = explained_pool(archive, "what did Caroline make at the pottery class")
    assert feature_of(pool, "asksQuestion") == {ids[0]: 1.0, ids[1]: 0.0, ids[2]: 0.0, ids[3]: 0.0}
    assert feature_of(pool, "followsQuestion") == {ids[0]: 0.0, ids[1]: 1.0, ids[2]: 0.0, ids[3]: 0.0}
    asks, follows = FEATURES.index("asksQuestion"), FEATURES.index("followsQuestion")
    for found in pool:
        reply, question = list(found["features"]), list(found["features"])
        reply[asks], reply[follows], question[asks], question[follows] = 0.0, 1.0, 1.0, 0.0
        for model in load().models.values():
            assert model.probability([reply])[0] > model.probability([question])[0]


def test_the_ranker_reads_a_reply_with_the_question_it_answers(archive):
    """exchangeCoverage: the IDF-weighted share of the query terms a candidate's own text or the
    document just before it in its session holds together. A reply naming little of the query is
    read with the question it answers, also when that question is no candidate itself (still shown
    in the live window); a turn first in its session, or after a turn holding none of the query,
    has its own share."""
    said = [
        "Melanie: What did you make at the pottery class with the kids?",
        "Caroline: A cup with a dog face on it, and a bowl.",
    ]
    admitted = [archive.admit(turn("s", text, at=f"2026-11-01T10:0{i}:00Z")) for i, text in enumerate(said)]
    question, reply = (a["documentId"] for a in admitted)
    elsewhere = [
        archive.admit(turn("t", text, at=f"2026-11-02T10:0{i}:00Z"))["documentId"]
        for i, text in enumerate(["Jon: The dance studio opens next week.", "Caroline: The pottery class was full."])
    ]
    query = "what did Caroline make at the pottery class"
    pool = explained_pool(archive, query)
    own, exchange = feature_of(pool, "idfCoverage"), feature_of(pool, "exchangeCoverage")
    assert own[reply] < 0.5
    assert exchange[reply] == pytest.approx(1.0, abs=1e-3)
    for alone in (question, elsewhere[1]):
        assert exchange[alone] == pytest.approx(own[alone], abs=1e-3)
    shown = search(archive, query, explain=True, excludeVisibleSourceKeys=admitted[0]["messageKeys"])
    pool = shown["ranking"]["pool"]
    assert question not in {c["documentId"] for c in pool}
    assert feature_of(pool, "exchangeCoverage")[reply] == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize(
    ("message", "asks"),
    [
        ("When did we switch the mailer to Redis?", True),
        ("remind me, when was the last deploy", True),
        ("Which year did Caroline move?", True),
        ("how long ago did the build first break", True),
        ("since when does the cache expire early?", True),
        ("what broke when we upgraded the driver?", False),  # "when" joining two clauses
        ("why did we switch the mailer to Redis?", False),
        ("what did we decide about the retry budget", False),
    ],
)
def test_a_message_asking_when(message, asks):
    from cwa.retrieve.intent import asks_when

    assert asks_when(message) is asks


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("Melanie: What did you make at the pottery class?", True),
        ("I went running. How about you?", True),
        ("The answer is long.\n\nWant me to add the retry test too?\n", True),  # its last paragraph asks
        ("Why does the upload stall?\n\nThe multipart upload retries without resetting its stream.", False),
        ("Did you go? " + "We drove home and cooked dinner. " * 7, False),  # an aside long before the end
    ],
)
def test_what_counts_as_a_window_that_ends_asking(text, asks):
    """asksQuestion's and followsQuestion's reading of a window: its last paragraph asks a question
    (a request and its answer in one window do not)."""
    from cwa.retrieve.ranker import ends_asking

    assert ends_asking(text) is asks


@pytest.mark.parametrize(
    ("text", "mentions"),
    [
        ("We shipped the mailer fix last week.", True),
        ("Caroline: I went to the support group yesterday.", True),
        ("the deploy on Friday broke it", True),
        ("back in March, before the freeze", True),
        ("we switched to Redis in 2023", True),
        ("the incident of 3/14/2024", True),
        ("that was two days ago", True),
        ("We moved the mailer queue to Redis streams.", False),
        ("the retry may fail twice", False),  # "may" is a verb: months are read capitalized
        ("it takes a few minutes and runs weekly", False),  # a duration or a frequency is no time
        ("the deploy starts at 3 p.m. on the dot", True),  # a time of day
        ("the cron job fires at 10:30", True),
        ("see you at noon then", True),
        ("I ran into her the other day", True),
        ("we talked this afternoon", True),
        ("We met in May to plan it", True),  # "May" after a word introducing a time
        ("On May 8 the cache broke", True),  # or before a number
        ("it was early Jan. when we moved", True),
        ("May I ask you about the queue?", False),  # "May" the verb
        ("Jan said the build is green", False),  # a short form that is a name
        ("pm2 restarted the app, the ratio is 3:1", False),
    ],
)
def test_what_counts_as_mentioning_a_time(text, mentions):
    """timeMention's reading of a text: a relative day or period, a weekday, a month, a year, a
    date or a time of day; "May" and the months' short forms only where they are a month."""
    from cwa.retrieve.ranker import mentions_time

    assert mentions_time(text) is mentions


def _exchange(archive, session: str, said: str, reply: str, day: int) -> tuple[str, str]:
    """A user's message and the assistant's reply after it, each a document of its own; their ids."""
    ids = []
    for minute, (role, text) in enumerate((("user", said), ("assistant", reply))):
        request = {
            "project": P,
            "sessionId": session,
            "kind": "turn",
            "createdAt": f"2026-11-{day:02d}T10:0{minute}:00Z",
            "messages": [{"role": role, "text": text}],
        }
        ids.append(archive.admit(request)["documentId"])
    return ids[0], ids[1]


def test_a_reply_restating_the_users_words_ranks_below_them(archive):
    """Asked what the user said they prefer, the user's message comes before the assistant's reply
    that says it back (which holds the same words, and more of them), and so it does for any query
    when the reply opens by saying it back; not when the user asked a question (the reply is its
    answer), nor, for a query not about the user's words, when the reply opens otherwise."""
    said, echo = _exchange(
        archive,
        "s",
        "One more thing: I prefer tabs for indentation in the deploy scripts.",
        "Got it: you prefer tabs for indentation in the deploy scripts. I converted the deploy "
        "scripts to tabs; indentation with tabs in every deploy script, and the editor config "
        "now sets tabs for indentation too.",
        1,
    )
    asked, answer = _exchange(
        archive,
        "t",
        "Should the release notes use tabs or spaces for indentation?",
        "Use tabs for indentation in the release notes: tabs keep the release notes' indentation "
        "consistent with the deploy scripts, tabs everywhere.",
        2,
    )
    stated, done = _exchange(
        archive,
        "u",
        "For the mailer I prefer exponential backoff on retries.",
        "Done that way. I changed the mailer retries to exponential backoff, so every mailer retry "
        "now backs off exponentially, and the mailer tests cover the backoff.",
        3,
    )
    for text in ("The staging server restarted overnight.", "Lint passes on the API module."):
        _exchange(archive, f"other-{text[:3]}", text, "Noted, nothing to do there.", 4)

    order = ids_of(search(archive, "What indentation did I say I prefer for the deploy scripts?"))
    assert order.index(said) < order.index(echo)
    order = ids_of(search(archive, "tabs indentation deploy scripts"))
    assert order.index(said) < order.index(echo)  # the reply opens by saying it back
    order = ids_of(search(archive, "What indentation did I ask for in the release notes?"))
    assert order.index(answer) < order.index(asked)
    order = ids_of(search(archive, "What backoff did I say I prefer for the mailer retries?"))
    assert order.index(stated) < order.index(done)
    order = ids_of(search(archive, "mailer retry backoff"))
    assert order.index(done) < order.index(stated)  # not about the user's words, not said back: as ranked


@pytest.mark.parametrize(
    ("reply", "says_back"),
    [
        ("[assistant at=2026-11-01T10:01:00Z]\nGot it: you prefer tabs for indentation in the deploy scripts.", True),
        ("Understood: tabs for indentation in the deploy scripts from now on. I converted them.", True),
        ("Done that way. Tabs for indentation in the deploy scripts.", False),  # its opening says nothing back
        ("Got it.", False),
        ("The root cause was the editor config; I converted the deploy scripts to tabs.", False),
    ],
)
def test_a_reply_opening_by_saying_the_message_back(reply, says_back):
    from cwa.retrieve.restatement import opens_saying_back

    said = "One more thing: I prefer tabs for indentation in the deploy scripts."
    assert opens_saying_back(reply, said) is says_back
