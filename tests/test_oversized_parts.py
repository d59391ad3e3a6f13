"""Whatever part of a message is large — a bash command, assistant text, thinking, tool-call
arguments, a custom or summary message, a block of a type cwa does not read, an extra field —
is counted, archived exactly and shown as a preview naming its archive, through `cwa serve`."""

from __future__ import annotations

import orjson
import pytest
from conftest import hermetic_env, run_cwa

from cwa.api import Archive
from cwa.session.transcript import UNCOUNTED_SLACK
from cwa.store.admission import document_ids_in

T0 = 1_795_000_000_000
BIG = "".join(f"token{n % 997} " for n in range(400_000))[:1_500_000]  # 1.5 MB, far above every cap


def _user(text: str = "ok", **extra) -> dict:
    return {"role": "user", "content": text, "timestamp": T0, **extra}


def _call(call_id: str, arguments: dict, name: str = "write") -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}],
        "stopReason": "toolUse",
        "timestamp": T0 + 1,
    }


CASES = {
    "bash command": [
        _user("run it"),
        {
            "role": "bashExecution",
            "command": "printf '%s' " + BIG[:400_000],
            "output": "done",
            "exitCode": 0,
            "timestamp": T0 + 1,
        },
    ],
    "assistant text": [
        _user("write"),
        {"role": "assistant", "content": [{"type": "text", "text": BIG}], "stopReason": "stop", "timestamp": T0 + 1},
    ],
    "thinking": [
        _user("think"),
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": BIG, "thinkingSignature": "c2ln"},
                {"type": "text", "text": "ok"},
            ],
            "stopReason": "stop",
            "timestamp": T0 + 1,
        },
    ],
    "toolCall arguments": [
        _user("write it"),
        _call("c1", {"path": "a.txt", "content": BIG}),
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "write",
            "content": [{"type": "text", "text": "written"}],
            "timestamp": T0 + 2,
        },
    ],
    "custom": [_user(), {"role": "custom", "customType": "note", "content": BIG, "display": True, "timestamp": T0 + 1}],
    "branchSummary": [{"role": "branchSummary", "summary": BIG, "fromId": "e1", "timestamp": T0}, _user("go on")],
    "compactionSummary": [
        {"role": "compactionSummary", "summary": BIG, "tokensBefore": 9, "timestamp": T0},
        _user("go on"),
    ],
    "unknown user block": [
        {
            "role": "user",
            "content": [{"type": "text", "text": "see the file"}, {"type": "file", "data": BIG}],
            "timestamp": T0,
        }
    ],
    "user extra field": [_user("hi", attachment=BIG)],
    "tool extra field": [
        _user("list"),
        _call("c2", {}, "ls"),
        {
            "role": "toolResult",
            "toolCallId": "c2",
            "toolName": "ls",
            "timestamp": T0 + 2,
            "content": [{"type": "text", "text": "a b"}],
            "details": {"listing": BIG},
        },
    ],
}


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    root = tmp_path_factory.mktemp("oversized")
    lines = b"".join(
        orjson.dumps(
            {
                "id": name,
                "method": "session-context",
                "params": {
                    "project": "/work/big",
                    "sessionId": name,
                    "messages": messages,
                    "model": {"contextWindow": 200_000, "maxTokens": 8_192},
                },
            }
        )
        + b"\n"
        for name, messages in CASES.items()
    )
    done = run_cwa(["serve", "--no-background"], hermetic_env(root, root / "archive.db"), stdin=lines, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    replies = {reply["id"]: reply for reply in map(orjson.loads, done.stdout.splitlines())}
    return root / "archive.db", replies


def _archived_text(archive: Archive, document_id: str) -> str:
    doc = archive.get({"documentId": document_id})
    if doc.get("complete"):
        return doc["text"]
    pieces, start = [], 0
    while start < doc["byteLength"]:
        end = min(doc["byteLength"], start + (1 << 20))
        pieces.append(archive.get({"documentId": document_id, "range": {"start": start, "end": end}})["text"])
        start = end
    return "".join(pieces)


@pytest.mark.parametrize("case", list(CASES))
def test_a_large_part_is_counted_archived_and_previewed(answers, case):
    db, replies = answers
    result = replies[case]["result"]
    copy = orjson.dumps(result["messages"])
    sent = len(orjson.dumps(CASES[case]))
    assert len(copy) < 16_384 < sent  # before: the whole part went to the provider
    # every byte counted (before: 10 tokens for 400 KB), but a message's own framing fields
    assert result["status"]["tokens"] * 4 >= len(copy) - UNCOUNTED_SLACK * len(result["messages"])
    named = set(document_ids_in(copy.decode()))
    assert len(named) == 1, named  # the preview names where the rest is
    with Archive.open(db) as archive:
        text = _archived_text(archive, named.pop())
    assert BIG[:400_000] in text or orjson.dumps(BIG[:400_000]).decode()[1:-1] in text  # exactly, every byte
    assert any(e["type"] in ("oversized-archived", "externalized") for e in result["events"])


def test_a_replaced_assistant_message_keeps_its_tool_call_paired(answers):
    _, replies = answers
    messages = replies["toolCall arguments"]["result"]["messages"]
    assistant = next(m for m in messages if m["role"] == "assistant")
    calls = [b for b in assistant["content"] if b["type"] == "toolCall"]
    assert [c["id"] for c in calls] == ["c1"] and calls[0]["name"] == "write"
    assert isinstance(calls[0]["arguments"], dict) and len(orjson.dumps(calls[0]["arguments"])) < 512
    assert messages[-1]["role"] == "toolResult" and messages[-1]["toolCallId"] == "c1"
