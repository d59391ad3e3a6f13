"""Long synthetic coding histories with planted facts: `cwa eval long`.

One user and an assistant work on one project for months: dated sessions of requests, long
assistant answers and tool output, all about the same few dozen components, so every word a
question uses recurs across the history (the single-topic shape that makes long histories hard,
unlike distractors on other topics). Into it go facts of six kinds, each asked once at the end in
words other than the ones that stated it:

- `update`: a choice stated, then reversed sessions later; asked what is used now. Evidence: the
  reversal only (the first statement is a lure sharing its words).
- `fix`: a failing test's error in a tool result, the assistant's fix turns later; asked how the
  problem was solved. Evidence: the fix.
- `temporal`: the same error; asked when it first appeared. Evidence: the error's tool result.
- `preference`: a preference the user states once; asked what the user likes.
- `value`: a setting the assistant chose ("the pool's timeout to 45 seconds"); asked in other words.
- `instruction`: a standing instruction the user gives once; asked whether there is a rule.

The background mentions the same components, choices, settings and topics in passing, so the
lures are real. Every message is a document of its own, keyed `s<session>:<n>`; the floor (bare
SQLite FTS5, as `cwa eval locomo` measures it) indexes the same messages in the same run. The same
seed always gives the same histories. The learned ranker trains on histories of other seeds
(`training_examples`), never on the evaluation's.

With `inside` (`cwa eval long --inside`) each fact is one sentence of a long message of its role
(an answer of several paragraphs, a request with detail, a tool's output among other runs), as
real long conversations hold them; the evidence is that whole message.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cwa.api import Archive
from cwa_eval.retrieval import ranker_training as training
from cwa_eval.retrieval.haystack import tokens_of
from cwa_eval.retrieval.sessions import _tool_output

DAY_MS = 86_400_000
START_MS = 1_767_600_000_000  # 2026-01-05
# The learned ranker also trains on long histories (`training_examples` below): these seeds, sizes and
# counts, never the evaluation's (its default seed is 41: other components, choices, positions;
# the templates are the same, so `cwa eval long` is in distribution for the shipped ranker).
TRAINING_SEED = 9001
TRAINING_SIZES = (60_000, 120_000)  # tokens, alternating over the histories
TRAINING_HISTORIES = 8
TRAINING_INSIDE = (2, 3, 6, 7)  # these histories plant their facts inside long messages, so the trees
# see evidence at every message length (a feature of length alone would learn the generator's shapes)
TRAINING_PER_KIND = 5
KINDS = ("update", "fix", "temporal", "preference", "value", "instruction")

# (name, how a question may call it instead)
COMPONENTS = (
    ("connection pool", "pool of database connections"),
    ("retry policy", "rules for retrying failed calls"),
    ("session cache", "cache that keeps logged-in users"),
    ("billing webhook", "endpoint the payment provider calls"),
    ("rate limiter", "throttle on incoming requests"),
    ("search index", "index behind the search box"),
    ("upload service", "service that accepts file uploads"),
    ("job scheduler", "thing that runs the nightly jobs"),
    ("auth middleware", "login check in front of the routes"),
    ("config loader", "code that reads the settings files"),
    ("email queue", "outgoing mail queue"),
    ("metrics exporter", "exporter feeding the dashboards"),
    ("feature flag service", "toggles for unfinished features"),
    ("migration runner", "tool that applies schema changes"),
    ("thumbnail worker", "image resizing worker"),
    ("audit log", "record of who changed what"),
    ("report builder", "monthly report generator"),
    ("notification service", "push notification sender"),
    ("API gateway", "front door for the public API"),
    ("CSV exporter", "spreadsheet export"),
    ("invoice renderer", "PDF invoice generation"),
    ("websocket hub", "live update channel"),
    ("geo lookup", "address to coordinates lookup"),
    ("backup job", "nightly database dump"),
)
CHOICE_PAIRS = (
    ("Redis", "Memcached"),
    ("exponential backoff", "a fixed two second delay"),
    ("PostgreSQL advisory locks", "a lease table"),
    ("JSON payloads", "MessagePack"),
    ("cron", "a task queue"),
    ("gzip", "zstd"),
    ("UUIDv4 keys", "ULIDs"),
    ("polling", "server-sent events"),
    ("a thread pool", "asyncio"),
    ("S3", "local disk"),
    ("SQLAlchemy", "raw SQL files"),
    ("Celery", "RQ"),
    ("nginx", "Caddy"),
    ("JWT tokens", "opaque session ids"),
    ("a blue-green deploy", "rolling restarts"),
    ("Jinja templates", "string formatting"),
)
# (error text in the tool result, how a question names the problem, cause, remedy)
SYMPTOMS = (
    (
        "deadlock detected while waiting for ShareLock",
        "deadlock",
        "two workers took row locks in opposite order",
        "lock rows sorted by id",
    ),
    (
        "ConnectionRefusedError: [Errno 111] Connection refused",
        "refused connections",
        "the client started before its server was ready",
        "wait for the health check before connecting",
    ),
    (
        "AssertionError: expected 120 rows, got 240",
        "doubled rows",
        "the join fanned out over a many-to-many table",
        "deduplicate on the primary key before counting",
    ),
    (
        "OSError: [Errno 24] Too many open files",
        "file handle exhaustion",
        "temporary files were never closed",
        "open them in a with block",
    ),
    (
        "TimeoutError: operation exceeded 30s",
        "hanging calls",
        "a DNS lookup blocked the event loop",
        "resolve names in an executor",
    ),
    (
        "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xe9",
        "garbled accented characters",
        "uploads were latin-1, not utf-8",
        "detect the encoding before decoding",
    ),
    (
        "KeyError: 'tenant_id'",
        "missing tenant field",
        "old events predate the tenant column",
        "default the tenant for legacy events",
    ),
    (
        "MemoryError",
        "running out of memory",
        "the whole result set was loaded at once",
        "stream rows in batches of 500",
    ),
    (
        "IntegrityError: duplicate key value violates unique constraint",
        "duplicate-key crash",
        "retries re-inserted a row that had committed",
        "make the insert idempotent with ON CONFLICT DO NOTHING",
    ),
    (
        "ssl.SSLCertVerificationError: certificate has expired",
        "expired certificate failure",
        "the staging certificate bundle was stale",
        "refresh the CA bundle at build time",
    ),
    (
        "RecursionError: maximum recursion depth exceeded",
        "runaway recursion",
        "a parent pointer formed a cycle",
        "track visited nodes while walking",
    ),
    (
        "ValueError: time data '2026-13-01' does not match format",
        "bad date parsing",
        "month and day were swapped for European locales",
        "parse ISO 8601 only",
    ),
)
# (setting, value format, a question asking for it without its name)
SETTINGS = (
    ("timeout", "{n} seconds", "How long does the {c} wait before it gives up?"),
    ("batch size", "{n} items", "How many items does the {c} handle in one go?"),
    ("retry limit", "{n} attempts", "How many times will the {c} try again before failing?"),
    ("worker count", "{n} workers", "How many processes run the {c} in parallel?"),
    ("TTL", "{n} minutes", "How long do entries stay alive in the {c}?"),
    ("port", "port {n}0", "On which port does the {c} listen?"),
    ("payload limit", "{n} KB", "What is the largest request the {c} accepts?"),
)
# (the user's statement, the question)
PREFERENCES = (
    (
        "Please keep commit messages short, imperative, and under fifty characters.",
        "How do I want commit messages written?",
    ),
    (
        "I prefer type hints on every public function, even the tiny ones.",
        "What is my stance on annotating function signatures?",
    ),
    ("Use pytest fixtures for setup, never unittest setUp methods.", "Which way of preparing test state do I like?"),
    ("I'd rather we log JSON lines than free-form text.", "What log format did I say I favour?"),
    ("I like small pull requests, one concern each.", "How big should a change be before review, in my view?"),
    ("Write docstrings in Google style with Args and Returns sections.", "Which docstring convention do I want?"),
    ("Four spaces for indentation everywhere, no tabs.", "What indentation did I ask for?"),
    (
        "Prefer dataclasses over plain dicts for records passed between modules.",
        "What should records handed between modules be?",
    ),
    (
        "Error messages should tell the user what to do next, not just what failed.",
        "What did I want error messages to include?",
    ),
    ("I want early returns instead of deeply nested if blocks.", "How do I like control flow structured?"),
    (
        "Name things after what they mean in the business, not after the tables.",
        "How should identifiers be chosen, according to me?",
    ),
    ("Keep functions under forty lines when you can.", "How long may a function get before I complain?"),
)
INSTRUCTIONS = (
    (
        "From now on, run the linter before every commit.",
        "Is there a standing rule about checking style before committing?",
    ),
    (
        "Always add a changelog entry with each user-facing change.",
        "What did I say about recording changes users will notice?",
    ),
    (
        "Never run a script against the production database without a dry run first.",
        "What's the rule for scripts that touch prod data?",
    ),
    ("Every new endpoint needs an integration test before it merges.", "What must accompany a new API route?"),
    (
        "Keep secrets out of the repository; load them from the environment.",
        "Where are credentials supposed to come from?",
    ),
    ("Ask me before merging anything that changes the schema.", "When do I want to be consulted before a merge?"),
    ("Pin every dependency to an exact version in the lock file.", "How should package versions be specified?"),
    ("Tag a release only after the staging smoke tests pass.", "What has to happen before we cut a release?"),
    ("Write the migration and its rollback together, in the same change.", "What goes with every database migration?"),
    ("Put feature work behind a flag until product signs off.", "How should unfinished features be shipped?"),
)
UPDATE_STATED = (
    "For the {c}, let's go with {a}.",
    "I'd like the {c} built on {a}; it's what the team knows.",
    "Let's use {a} for the {c} for now.",
)
UPDATE_REVERSED = (
    "Change of plan for the {c}: drop {a} and move it to {b}.",
    "{A} isn't working out for the {c}; switch it over to {b}.",
    "We're replacing {a} in the {c} with {b}, starting this week.",
)
UPDATE_QUESTIONS = (
    "What does the {c} rely on at this point?",
    "Which option is the {c} currently using?",
    "After all the back and forth, what did the {c} end up with?",
)
FIX_TURNS = (
    "Found the cause of the failing {c} test: {cause}. I changed {path} to {remedy}, and the suite is green again.",
    "The {c} failure is fixed. Root cause: {cause}. The patch in {path} makes it {remedy}.",
)
FIX_QUESTIONS = (
    "How did we get rid of the {problem} in the {c}?",
    "What turned out to be behind the {problem} in the {c}, and what was the repair?",
)
TEMPORAL_QUESTIONS = (
    "When did the {problem} in the {c} first show up?",
    "On which day did we first run into the {problem} with the {c}?",
)
VALUE_TURNS = (
    "I set the {c}'s {setting} to {value}.",
    "The {c} now runs with a {setting} of {value}, which covers the peak load we measured.",
)
# Background: requests and answers about the same components, with lures in passing.
REQUESTS = (
    "Can you look at the {c}? Something about {c2} feels off since yesterday.",
    "Please add tests for the {c} in {path}.",
    "Let's refactor {symbol} so the {c} is easier to follow.",
    "Why is the {c} slow under load? The dashboards show spikes every hour.",
    "Review my change to {path}, it touches the {c} and the {c2}.",
    "Write a short design note on how the {c} talks to the {c2}.",
    "The {c} logs are noisy, can we cut them down?",
    "What would it take to move the {c} to {choice}?",
    "Run the {c} test suite and tell me what breaks.",
    "Document the {setting} of the {c} in the README.",
)
SENTENCES = (
    "I looked at {path} and the {c} keeps its state in {symbol}, which the {c2} reads on every request.",
    "The {c} builds its {setting} from the environment, so the default only applies in development.",
    "One option would be {choice} for the {c2}, but that changes how retries and timeouts interact.",
    "I ran the tests for the {c}; {n} passed and the flaky one in {path} passed on a second run.",
    "The slow part is the loop in {symbol}: it issues one query per item instead of a batch.",
    "We could cache the result, but the {c} already invalidates entries whenever the {c2} writes.",
    "I kept the public interface of {symbol} unchanged so the callers in the {c2} need no edits.",
    "The commit also renames a helper in {path}; the behaviour is the same.",
    "Under load the {c} spends most of its time serialising payloads, about {n} percent in the profile.",
    "I added a log line with the request id so we can follow a call from the {c} into the {c2}.",
    "The {setting} of the {c2} is {value} today, which looks generous but is fine for now.",
    "There is a {exc} in an old branch of {symbol}, but nothing reaches it since the last refactor.",
    "If we adopt {choice}, the deploy scripts and the local setup both need a small change.",
    "The test fixtures for the {c} create {n} rows, enough to exercise pagination.",
    "I left a TODO in {path} about the error path; it only matters if the {c2} is down.",
    "The dashboards for the {c} show p95 latency of {n} ms after the change.",
    "Reading the code again, {symbol} mixes parsing and validation; splitting them would help the {c}.",
    "For the linter, the new module needed two ignores that I removed by simplifying the code.",
    "The migration for the {c} adds a nullable column first, so it is safe to deploy before the code.",
    "I wrote the changelog entry and a short note in the pull request about the {c}.",
    "The staging run of the {c} went through without errors; production metrics look the same.",
    "Secrets for the {c2} come from the environment, as everywhere else in the project.",
    "The {c} and the {c2} share a connection, so a slow query in one stalls the other.",
    "Commit messages in this branch follow the usual style; I squashed the fixups.",
)
# The exchange around a planted message: the user's request before an assistant's or a tool's,
# the assistant's reply after a user's or a tool's.
LEADS = {
    "assistant": (
        "Can you take care of the {c} next?",
        "The {c} needs attention, please have a look.",
        "Next up is the {c}; do what it needs.",
    ),
    "toolResult": (
        "Run the {c} tests, please.",
        "Check whether the {c} suite still passes.",
    ),
}
REPLIES = {
    "user": ("Noted.", "Understood, I'll keep to that.", "Got it.", "Will do."),
    "toolResult": ("The {c} suite has a failure; I'll dig into it.", "One {c} test fails; looking at it now."),
}
# an assistant's reply that restates what the user just said (`echo`)
ECHOES = ("Got it: {said}", "Understood: {said} I'll keep that in mind.", "Noted. To confirm: {said}")
_PERSON = {"i": "you", "i'd": "you'd", "i'm": "you're", "i've": "you've", "me": "you", "my": "your", "mine": "yours"}


def second_person(statement: str) -> str:
    """A first-person statement as the listener restates it ("I prefer X" → "you prefer X")."""
    return re.sub(
        r"\b(?:I'd|I'm|I've|I|me|my|mine)\b", lambda m: _PERSON[m.group().lower()], statement, flags=re.IGNORECASE
    )


PATH_PARTS = ("app", "core", "services", "workers", "api", "lib", "jobs", "db")
SYMBOL_PARTS = (
    "Pool",
    "Policy",
    "Cache",
    "Hook",
    "Limiter",
    "Index",
    "Runner",
    "Loader",
    "Queue",
    "Builder",
    "Client",
    "Hub",
)
EXCEPTIONS = ("KeyError", "TimeoutError", "ValueError", "IntegrityError", "OSError")


@dataclass
class Fact:
    kind: str
    question: str
    evidence: set[str] = field(default_factory=set)  # message keys


@dataclass
class History:
    documents: list[dict[str, Any]]  # admit requests without `project`, in order
    facts: list[Fact]
    tokens: int


class _Writer:
    """Fills templates with one history's random components, paths and symbols."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def slug(self, component: str) -> str:
        return component.lower().replace(" ", "_").replace("-", "_")

    def path(self, component: str | None = None) -> str:
        name = self.slug(component) if component else self.slug(self.rng.choice(COMPONENTS)[0])
        return f"{self.rng.choice(PATH_PARTS)}/{name}.py"

    def symbol(self, component: str) -> str:
        head = "".join(w.capitalize() for w in component.split()[:1])
        return head + self.rng.choice(SYMBOL_PARTS)

    def fill(self, template: str, component: str, **given: str) -> str:
        rng = self.rng
        other = rng.choice([c for c, _ in COMPONENTS if c != component])
        setting, shape, _ = rng.choice(SETTINGS)
        values = {
            "c": component,
            "c2": other,
            "path": self.path(component),
            "symbol": self.symbol(component),
            "choice": rng.choice(rng.choice(CHOICE_PAIRS)),
            "setting": setting,
            "value": shape.format(n=rng.randint(2, 90)),
            "exc": rng.choice(EXCEPTIONS),
            "n": str(rng.randint(3, 400)),
            **given,
        }
        return template.format(**values)

    def request(self, component: str) -> str:
        return self.fill(self.rng.choice(REQUESTS), component)

    def paragraph(self, component: str) -> str:
        rng = self.rng
        return " ".join(
            self.fill(rng.choice(SENTENCES), component if rng.random() < 0.7 else rng.choice(COMPONENTS)[0])
            for _ in range(rng.randint(3, 6))
        )

    def answer(self, component: str) -> str:
        return "\n\n".join(self.paragraph(component) for _ in range(self.rng.randint(2, 6)))

    def failing_test(self, component: str, error: str) -> str:
        slug = self.slug(component)
        frames = "\n".join(
            f'  File "{self.path(component)}", line {self.rng.randint(10, 600)}, in {self.rng.choice(("run", "handle", "flush", "load"))}'
            for _ in range(self.rng.randint(3, 8))
        )
        return (
            f"$ pytest tests/test_{slug}.py -q\n"
            f"Traceback (most recent call last):\n{frames}\n{error}\n"
            f"FAILED tests/test_{slug}.py::test_{self.rng.choice(('concurrent', 'roundtrip', 'bulk', 'edge'))}_case\n"
            f"1 failed, {self.rng.randint(5, 80)} passed"
        )


def history(seed: int, budget: int, per_kind: int, inside: bool = False, echo: bool = False) -> History:
    """One history of about `budget` tokens with `per_kind` facts of each kind. `inside`: each
    planted fact is one sentence (or line) of a long message of its role, not a message of its
    own (see `_surround`); the evidence is that message. `echo`: the assistant's reply to a
    planted user statement restates it in the second person, as chat assistants do ("Got it: you
    prefer …"); the evidence stays the user's message."""
    rng = random.Random(seed)
    echoes = random.Random(-seed)  # its own stream: a history with echoes is the same history otherwise
    writer = _Writer(rng)
    components = list(COMPONENTS)
    rng.shuffle(components)
    choices = list(CHOICE_PAIRS)
    rng.shuffle(choices)
    symptoms = list(SYMPTOMS)
    rng.shuffle(symptoms)
    preferences = rng.sample(PREFERENCES, min(per_kind, len(PREFERENCES)))
    instructions = rng.sample(INSTRUCTIONS, min(per_kind, len(INSTRUCTIONS)))
    facts: list[Fact] = []
    planted: list[tuple[float, int, str, str, str]] = []  # (share of the budget, fact, role, text, subject)

    def at(low: float = 0.02, high: float = 0.95) -> float:
        return rng.uniform(low, high)

    def name(component: tuple[str, str]) -> str:
        return component[1] if rng.random() < 0.5 else component[0]

    used = iter(components * 4)
    for n in range(per_kind):
        component = next(used)
        a, b = choices[n % len(choices)]
        first = at(0.02, 0.6)
        facts.append(Fact("update", rng.choice(UPDATE_QUESTIONS).format(c=name(component))))
        stated = rng.choice(UPDATE_STATED).format(c=component[0], a=a)
        reversed_ = rng.choice(UPDATE_REVERSED).format(c=component[0], a=a, A=a[0].upper() + a[1:], b=b)
        planted += [
            (first, len(facts) - 1, "user", stated, component[0]),
            (at(first + 0.1, 0.97), len(facts) - 1, "user", reversed_, component[0]),
        ]
    for n in range(per_kind):
        component = next(used)
        error, problem, cause, remedy = symptoms[n % len(symptoms)]
        seen = at(0.02, 0.85)
        fixed = min(0.98, seen + rng.uniform(0.001, 0.1))
        facts.append(Fact("fix", rng.choice(FIX_QUESTIONS).format(problem=problem, c=name(component))))
        facts.append(Fact("temporal", rng.choice(TEMPORAL_QUESTIONS).format(problem=problem, c=name(component))))
        fix = rng.choice(FIX_TURNS).format(c=component[0], cause=cause, path=writer.path(component[0]), remedy=remedy)
        planted += [
            (seen, len(facts) - 1, "toolResult", writer.failing_test(component[0], error), component[0]),
            (fixed, len(facts) - 2, "assistant", fix, component[0]),
        ]
    for statement, question in preferences:
        facts.append(Fact("preference", question))
        planted.append((at(), len(facts) - 1, "user", statement, rng.choice(COMPONENTS)[0]))
    for n in range(per_kind):
        component = next(used)
        setting, shape, question = SETTINGS[n % len(SETTINGS)]
        value = shape.format(n=rng.randint(2, 90))
        facts.append(Fact("value", question.format(c=name(component))))
        text = rng.choice(VALUE_TURNS).format(c=component[0], setting=setting, value=value)
        planted.append((at(), len(facts) - 1, "assistant", text, component[0]))
    for statement, question in instructions:
        facts.append(Fact("instruction", question))
        planted.append((at(), len(facts) - 1, "user", statement, rng.choice(COMPONENTS)[0]))
    planted.sort(key=lambda p: p[0])

    documents: list[dict[str, Any]] = []
    spent, session, number, clock = 0, 0, 0, START_MS
    left = iter(planted)
    pending = next(left, None)
    session_left = rng.randint(8, 20)
    evidence_parts: dict[int, list[tuple[str, str]]] = {}

    def emit(role: str, text: str) -> str:
        nonlocal spent, number, clock
        key = f"s{session}:{number}"
        number += 1
        clock += rng.randint(20_000, 240_000)
        message: dict[str, Any] = {"key": key, "role": role, "text": text}
        kind = "turn"
        if role == "toolResult":
            kind = "tool-result"
            message.update(toolName="bash", toolCallId=f"call-{key}")
        documents.append(
            {"sessionId": f"session-{session:03d}", "kind": kind, "createdAt": clock, "messages": [message]}
        )
        spent += tokens_of(text)
        return key

    while spent < budget or pending is not None:
        while pending is not None and pending[0] * budget <= spent:
            _, fact, role, text, subject = pending
            # each fact inside an ordinary exchange: a request before what the assistant or a
            # tool says, a reply after what the user says
            if role != "user":
                emit("user", rng.choice(LEADS[role]).format(c=subject))
            statement = text
            if inside:
                text = _surround(writer, role, text, subject)
            evidence_parts.setdefault(fact, []).append((role, emit(role, text)))
            if role != "assistant":
                reply = rng.choice(REPLIES[role]).format(c=subject)
                if echo and role == "user":
                    reply = echoes.choice(ECHOES).format(said=second_person(statement))
                emit("assistant", reply + " " + writer.paragraph(subject))
            pending = next(left, None)
        component = rng.choice(COMPONENTS)[0]
        emit("user", writer.request(component))
        if rng.random() < 0.4:
            emit("toolResult", "\n".join(_tool_output(rng) for _ in range(rng.randint(1, 3))))
        emit("assistant", writer.answer(component))
        session_left -= 1
        if session_left == 0:
            session, number, session_left = session + 1, 0, rng.randint(8, 20)
            clock += rng.randint(1, 4) * DAY_MS
    for index, fact in enumerate(facts):
        parts = evidence_parts[index]
        # update: the reversal (the later part); fix: the fix turn; temporal: the error itself
        if fact.kind == "temporal":
            fact.evidence = {key for role, key in parts if role == "toolResult"}
        elif fact.kind == "fix":
            fact.evidence = {key for role, key in parts if role == "assistant"}
        else:
            fact.evidence = {parts[-1][1]}
    return History(documents, facts, spent)


def _surround(writer: _Writer, role: str, text: str, subject: str) -> str:
    """A planted fact inside a long message of its role, as long conversations hold them: an
    assistant's answer of several paragraphs with the fact opening one in the middle, a user's
    request with a paragraph of detail around the fact, a tool's output with other runs' output
    before and after it."""
    rng = writer.rng
    if role == "assistant":
        before = [writer.paragraph(subject) for _ in range(rng.randint(1, 3))]
        after = [writer.paragraph(subject) for _ in range(rng.randint(1, 3))]
        return "\n\n".join([*before, text + " " + writer.paragraph(subject), *after])
    if role == "toolResult":
        before = [_tool_output(rng) for _ in range(rng.randint(1, 2))]
        after = [_tool_output(rng) for _ in range(rng.randint(1, 2))]
        return "\n".join([*before, text, *after])
    return " ".join([writer.request(subject), writer.paragraph(subject), text, writer.paragraph(subject)])


def project(index: int) -> str:
    return f"/long/history-{index}"


def admit_histories(archive: Archive, made: list[History]) -> None:
    """Each history into a project of its own (`project(index)`), its documents in order."""
    for index, made_history in enumerate(made):
        for document in made_history.documents:
            archive.admit({"project": project(index), **document})


def training_examples(folder: Path, pools: dict[str, dict[str, Any]]) -> dict[str, tuple[list, list]]:
    """Ranker examples from histories made with TRAINING_SEED: per pool, (features, labels) of
    each question's pool, labelled by its evidence messages (eval/retrieval/ranker_training.py)."""
    made = [
        history(TRAINING_SEED + i, TRAINING_SIZES[i % len(TRAINING_SIZES)], TRAINING_PER_KIND, i in TRAINING_INSIDE)
        for i in range(TRAINING_HISTORIES)
    ]
    found: dict[str, tuple[list, list]] = {name: ([], []) for name in pools}
    with Archive.open(folder / "long-training.db") as archive:
        admit_histories(archive, made)
        archive.call("index-embed", {})
        for name, pool in pools.items():
            for index, made_history in enumerate(made):
                for fact in made_history.facts:
                    features, labels = training.collect(archive, project(index), fact.question, fact.evidence, pool)
                    found[name][0].append(features)
                    found[name][1].append(labels)
    return found
