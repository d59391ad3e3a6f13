"""Grow each LoCoMo conversation's project into a long history: the haystack of `cwa eval locomo
--haystack TOKENS`.

Every conversation keeps its own turns (the only evidence) and gets distractor documents in its
own project until the project holds about TOKENS tokens (characters / 4):

1. the other conversations' dialog turns as they are, each in a session of its own: real chat,
   the same vocabulary, other people's facts;
2. then synthetic coding sessions, each document a user request, a long assistant answer and a
   long tool output: the request and the answer are sentences of the other conversations'
   turns recombined (natural English that competes lexically), the tool output synthetic logs
   (eval/retrieval/sessions.py).

Distractors are dated inside the conversation's own span of sessions (recency gives nothing
away) and keyed `x<n>:<i>`, so no distractor can be mistaken for an evidence turn. The floor
(bare FTS5) indexes the same documents' texts in the same run.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from typing import Any

from cwa_eval.retrieval.sessions import _tool_output

CHARS_PER_TOKEN = 4
CODING_SESSION = 12  # documents per synthetic coding session


def is_distractor(key: str) -> bool:
    """Whether a message key is a distractor's (`x<n>:<i>`), never a LoCoMo turn's (`D<s>:<t>`)."""
    return key.startswith("x")


def tokens_of(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def distractors(
    turns: list[list[tuple[str, str, str]]], own: int, dates: list[str], budget: int, seed: int = 29
) -> Iterator[dict[str, Any]]:
    """Admit requests (without `project`) for conversation `own`'s haystack, about `budget`
    tokens; `turns` holds every conversation's (session key, date text, turn text) in order."""
    rng = random.Random(seed + own)
    others = [t for i, found in enumerate(turns) if i != own for t in found]
    sentences = [re.sub(r"^[^:]{1,40}: ", "", text) for _, _, text in others]
    spent, number = 0, 0
    for index, (session, _, text) in enumerate(others):
        if spent >= budget:
            return
        spent += tokens_of(text)
        yield {
            "sessionId": f"other-{index // 400}-{session}",
            "kind": "turn",
            "createdAt": rng.choice(dates),
            "messages": [{"key": f"x{number}:{index}", "role": "custom", "text": text}],
        }
        number += 1
    while spent < budget:
        created = rng.choice(dates)
        request = " ".join(rng.choices(sentences, k=rng.randint(1, 2)))
        answer = " ".join(rng.choices(sentences, k=rng.randint(8, 24)))
        output = "\n".join(_tool_output(rng) for _ in range(rng.randint(2, 6)))
        messages = [
            {"key": f"x{number}:0", "role": "user", "text": request},
            {"key": f"x{number}:1", "role": "assistant", "text": answer},
            {"key": f"x{number}:2", "role": "toolResult", "toolName": "bash", "text": output},
        ]
        spent += sum(tokens_of(m["text"]) for m in messages)
        yield {
            "sessionId": f"coding-{number // CODING_SESSION}",
            "kind": "turn",
            "createdAt": created,
            "messages": messages,
        }
        number += 1
