"""A deterministic generator of synthetic coding sessions for benchmarks.

Each session mixes user questions, requests and corrections, assistant prose, and tool output:
test runs with stack traces and paths, JSON payloads, git logs with commit hashes. The same seed
always gives the same documents.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import orjson

WORDS = (
    "retry lock timeout backoff policy cache index query session token budget schema migration "
    "chunk window handler archive recall locator error path symbol commit config test assert "
    "deploy cluster ingress worker queue batch shard replica leader follower snapshot compaction "
    "parser lexer grammar plugin hook router middleware request response header cookie auth "
    "tenant billing invoice webhook signature payload encoder decoder buffer stream socket"
).split()
_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "shu", "dra", "kel", "mon", "tor", "vin", "xa")
# A long tail of rarer words, as real text has: drawn with Zipf-like weights.
VOCABULARY = tuple(WORDS) + tuple(a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES[:12])
_WEIGHTS = [1.0 / (rank + 1) ** 0.9 for rank in range(len(VOCABULARY))]
MODULES = ("core", "api", "store", "net", "auth", "billing", "search", "ui", "jobs", "cli")
ERRORS = (
    "KeyError",
    "TimeoutError",
    "ValueError",
    "ConnectionResetError",
    "ERR_LOCK_TIMEOUT",
    "ENOENT",
    "AssertionError",
    "E0425",
    "PermissionError",
    "ERR_QUOTA_EXCEEDED",
)


def word(rng: random.Random) -> str:
    return rng.choices(VOCABULARY, _WEIGHTS)[0]


def _sentence(rng: random.Random, low: int = 6, high: int = 30) -> str:
    return " ".join(rng.choices(VOCABULARY, _WEIGHTS, k=rng.randint(low, high)))


def _path(rng: random.Random) -> str:
    return f"src/{rng.choice(MODULES)}/{rng.choice(WORDS)}_{rng.choice(WORDS)}.py"


def _symbol(rng: random.Random) -> str:
    return (
        rng.choice(WORDS).capitalize()
        + rng.choice(WORDS).capitalize()
        + rng.choice(("Policy", "Store", "Client", "Handler"))
    )


def _tool_output(rng: random.Random) -> str:
    kind = rng.randrange(3)
    if kind == 0:
        frames = [
            f'  File "{_path(rng)}", line {rng.randint(1, 900)}, in {rng.choice(WORDS)}_{rng.choice(WORDS)}'
            for _ in range(rng.randint(3, 12))
        ]
        error = rng.choice(ERRORS)
        return "\n".join(
            [
                "$ pytest -q",
                "Traceback (most recent call last):",
                *frames,
                f"{error}: {_sentence(rng, 4, 12)}",
                f"FAILED tests/test_{rng.choice(WORDS)}.py",
            ]
        )
    if kind == 1:
        payload = {
            "id": rng.getrandbits(48),
            "status": rng.choice(("ok", "error", "pending")),
            "items": [{"name": rng.choice(WORDS), "size": rng.randint(1, 10_000)} for _ in range(rng.randint(2, 15))],
        }
        return orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode()
    lines = [
        f"{rng.getrandbits(160):040x}"[:10]
        + f" {rng.choice(('fix', 'feat', 'refactor'))}({rng.choice(MODULES)}): {_sentence(rng, 3, 9)}"
        for _ in range(rng.randint(3, 20))
    ]
    return "$ git log --oneline\n" + "\n".join(lines)


def synthetic_sessions(documents: int, seed: int = 7, project: str = "/bench/project") -> Iterator[dict]:
    """`documents` admit requests: turns and tool results in sessions of 40 documents."""
    rng = random.Random(seed)
    for n in range(documents):
        session = f"session-{n // 40:05d}"
        at = 1793527200000 + n * 60_000
        if n % 3 == 2:
            yield {
                "project": project,
                "sessionId": session,
                "kind": "tool-result",
                "createdAt": at,
                "messages": [
                    {
                        "role": "toolResult",
                        "toolName": "bash",
                        "toolCallId": f"call-{n}",
                        "timestamp": at,
                        "text": _tool_output(rng),
                    }
                ],
            }
            continue
        opener = rng.choice(
            (
                f"why does {_path(rng)} raise {rng.choice(ERRORS)} when the {rng.choice(WORDS)} {rng.choice(WORDS)}?",
                f"please refactor {_symbol(rng)} so the {rng.choice(WORDS)} {rng.choice(WORDS)} is configurable",
                f"no, don't change {_path(rng)}; use {_symbol(rng)} instead",
                f"{_sentence(rng)}",
            )
        )
        yield {
            "project": project,
            "sessionId": session,
            "kind": "turn",
            "createdAt": at,
            "messages": [
                {"role": "user", "text": opener, "timestamp": at},
                {
                    "role": "assistant",
                    "timestamp": at + 500,
                    "text": f"{_sentence(rng, 20, 80)}. I changed {_path(rng)} and {_symbol(rng)}.",
                },
            ],
        }


_SPEAKERS = ("Ana", "Bo", "Caro", "Dev", "Eli", "Fay")
_CHAT = (
    "i",
    "you",
    "we",
    "it",
    "was",
    "so",
    "really",
    "that",
    "the",
    "a",
    "and",
    "to",
    "my",
    "with",
    "just",
    "last",
    "week",
    "yesterday",
    "going",
    "love",
    "think",
    "great",
    "fun",
    "time",
    "friends",
    "family",
)


def chat_sessions(documents: int, seed: int = 7, project: str = "/bench/chat") -> Iterator[dict]:
    """`documents` admit requests shaped like LoCoMo: one short dated turn each ("Name: text", about
    140 bytes), two speakers per session of 20 turns."""
    rng = random.Random(seed)
    for n in range(documents):
        pair = _SPEAKERS[(n // 20) % len(_SPEAKERS)], _SPEAKERS[(n // 20 + 1) % len(_SPEAKERS)]
        words = [rng.choice(_CHAT) if rng.random() < 0.45 else word(rng) for _ in range(rng.randint(7, 38))]
        yield {
            "project": project,
            "sessionId": f"chat-{n // 20:05d}",
            "kind": "turn",
            "createdAt": 1793527200000 + n * 60_000,
            "messages": [{"role": "custom", "text": f"{pair[n % 2]}: {' '.join(words)}"}],
        }


def prose_turns(count: int, project: str = "/bench/rebuild") -> Iterator[dict]:
    """`count` turns of two messages of 200 words each drawn from 4,000 (`term0` …), ten
    sessions: long prose without structure (what eval/perf/rebuild.py rebuilds). The same for the
    same count."""
    rng = random.Random(count)
    vocabulary = [f"term{i}" for i in range(4000)]
    for number in range(count):
        yield {
            "project": project,
            "sessionId": f"s{number % 10}",
            "kind": "turn",
            "messages": [
                {
                    "role": "user",
                    "text": f"retry budget {number} " + " ".join(rng.choice(vocabulary) for _ in range(200)),
                },
                {"role": "assistant", "text": " ".join(rng.choice(vocabulary) for _ in range(200))},
            ],
        }


def lint_turn(rng: random.Random, number: int) -> tuple[str, str, str, str]:
    """One turn of a linting session (what eval/perf/imports.py writes as client transcripts): the
    prompt, the shell command, its output (a file and line on each of 15–180 lines), the answer."""
    prompt = f"step {number}: check module {rng.randint(0, 400)}"
    lines = rng.randint(15, 180)
    output = "\n".join(
        f"src/module_{rng.randint(0, 400)}/file_{number}.py:{k}: {rng.choice(['ok', 'warn', 'E501 line too long', 'passed'])}"
        for k in range(lines)
    )
    return prompt, "make lint", output, f"Step {number} done."
