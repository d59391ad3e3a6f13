"""Structural cues: which messages are questions, requests, corrections, answers or decisions.

Scored per message by deterministic cues (no model). Scores are in [0, 1]; a message counts for
a relation (`latest-question`, …) at CUE_THRESHOLD or above.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import apsw

from cwa.store.derived import HandlerResult, IndexTarget
from cwa.store.serialization import SerializedDocument
from cwa.store.sqlfiles import queries

CUE_SCAN_CHARS = 4000  # cues live at the start of a message (and its last line for a "?")
CUE_THRESHOLD = 0.5
QUESTION_TAIL_CHARS = 200  # a question mark this near a text's end asks (an aside earlier does not)

_QUESTION_START = re.compile(
    r"^\s*(what|why|how|when|where|which|who|whose|can|could|would|should|is|are|was|were|do|does|"
    r"did|will|have|has|any idea|remind me)\b",
    re.I,
)
_REQUEST_START = re.compile(
    r"^\s*(please|pls|add|fix|make|create|implement|update|remove|delete|change|write|run|"
    r"refactor|rename|use|move|replace|build|install|set|turn|try|check|look|find|show|explain|"
    r"let'?s|go ahead|can you|could you|would you|i need you|i want you)\b",
    re.I,
)
_CORRECTION_START = re.compile(
    r"^\s*(no\b(?![\s,]+(problem|worries|thanks|rush|need|idea))|nope\b|wrong\b|actually\b|instead\b|"
    r"not\s(?!sure\b)|don'?t\b|do not\b|stop\b|undo\b|revert\b|"
    r"that'?s (not|wrong)|that is (not|wrong)|wait\b)",
    re.I,
)
_CORRECTION_ANYWHERE = re.compile(
    r"\b(instead of|i said|i meant|not what i|you misunderstood|that'?s incorrect)\b",
    re.I,
)
_DECISION_START = re.compile(r"^\s*decision\s*:", re.I)
_DECISION_ANYWHERE = re.compile(
    r"\b(we decided|we'?ll go with|let'?s go with|decided to|the decision is|we agreed|agreed to)\b",
    re.I,
)
# Words one of the ANYWHERE patterns' phrases holds whenever it matches: a message holding none
# (most do) is not scanned, a pattern of alternatives tried at every word boundary (nearly all
# of the cues' cost before: eval/perf/prepare_cost.py). `_folded` folds every character re.I
# matches to an ASCII letter to that letter (casefold, and two re.I equates casefold does not).
_FOLD_FIXES = str.maketrans({"\u0131": "i", "\u0307": ""})  # dotless ı; İ casefolds to i + U+0307
_CORRECTION_WORDS = ("instead of", "i said", "i meant", "not what i", "misunderstood", "incorrect")
_DECISION_WORDS = ("decided", "go with", "decision", "agreed")


def _folded(text: str) -> str:
    folded = text.casefold()
    return folded if folded.isascii() else folded.translate(_FOLD_FIXES)


def corrects(text: str) -> bool:
    """Whether `text` corrects: it opens with "no", "actually", "don't" … or says "I meant",
    "instead of" … anywhere."""
    return _says(text, _CORRECTION_START, _CORRECTION_WORDS, _CORRECTION_ANYWHERE)


def decides(text: str) -> bool:
    """Whether `text` states a decision: it opens with "Decision:" or says "we decided", "let's go
    with", "agreed to" … anywhere."""
    return _says(text, _DECISION_START, _DECISION_WORDS, _DECISION_ANYWHERE)


def _says(text: str, start: re.Pattern[str], words: tuple[str, ...], anywhere: re.Pattern[str]) -> bool:
    """`start` matches its opening, or `anywhere` somewhere, scanned only when one of `words` is in it."""
    if start.search(text):
        return True
    folded = _folded(text)
    return any(word in folded for word in words) and bool(anywhere.search(text))


def asks_question(text: str) -> bool:
    """Whether `text` ends asking a question: a question mark in its last QUESTION_TAIL_CHARS."""
    return "?" in text.rstrip()[-QUESTION_TAIL_CHARS:]


def is_request(text: str) -> bool:
    """Whether `text` opens as a request ("please …", "add …", "could you …"), also one put as a
    question."""
    return bool(_REQUEST_START.search(text))


@dataclass(frozen=True)
class MessageView:
    role: str
    text: str


def score_messages(kind: str, messages: Sequence[MessageView]) -> list[dict[str, float]]:
    """For each message, the cues that apply and their scores."""
    scored: list[dict[str, float]] = []
    asked = False  # a user message is waiting for an answer
    for message in messages:
        cues: dict[str, float] = {}
        text = message.text[:CUE_SCAN_CHARS]
        if kind == "decision":
            cues["decision"] = 1.0
        elif message.role in ("user", "assistant", "custom") and decides(text):
            cues["decision"] = 0.8
        if message.role == "user":
            if asks_question(message.text):
                cues["question"] = 0.9
            elif _QUESTION_START.search(text):
                cues["question"] = 0.6
            if corrects(text):
                cues["correction"] = 0.85
            if is_request(text):
                cues["request"] = 0.8
            elif "correction" in cues and "question" not in cues:
                cues["request"] = 0.6  # "No, use backoff instead" also asks for something
            asked = True
        elif message.role == "assistant":
            if text.strip():
                # Only a reply to a user message in the same document counts as an answer.
                cues["answer"] = 0.8 if asked else 0.4
            asked = False
        scored.append(cues)
    return scored


def message_views(document: SerializedDocument) -> list[MessageView]:
    data = document.text
    return [MessageView(m.role, data[m.text_start : m.end].decode("utf-8")) for m in document.messages]


class StructuralHandler:
    name = "structural"

    def prepare(self, kind: str, document: SerializedDocument) -> list[dict[str, float]]:
        return score_messages(kind, message_views(document))

    def index(self, conn: apsw.Connection, target: IndexTarget) -> HandlerResult:
        scored = target.prepared.get(self.name)
        if scored is None:
            scored = self.prepare(target.kind, target.document)
        rows = [
            (target.document_row, ordinal, cue, score)
            for ordinal, cues in enumerate(scored)
            for cue, score in cues.items()
        ]
        conn.executemany(queries("index")["insert_cue"], rows)
        return HandlerResult("complete")
