"""`cwa demo`: archive a small sample coding session, written for cwa, and show what was stored.

The sample has fixed timestamps and keys, so running the demo twice stores nothing new. It lives
in its own project, DEMO_PROJECT, never in the project of the working directory (where it would
mix with real history and feed preflight); the commands the demo prints name it.
"""

from __future__ import annotations

from typing import Any

from cwa.api import Archive

DEMO_PROJECT = "demo:cwa-sample-project"
DEMO_SESSION = "demo-session-1"

_TRACEBACK = """$ pytest tests/test_retry.py -q
F.
=================================== FAILURES ===================================
______________________ test_retry_gives_up_after_timeout _______________________

    def test_retry_gives_up_after_timeout():
        policy = RetryPolicy(max_attempts=5)
>       result = run_with_retry(policy, acquire_lock)

tests/test_retry.py:18:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
src/retry.py:42: in run_with_retry
    raise LockTimeoutError(code="ERR_LOCK_TIMEOUT", waited_ms=30000)
E   retry.LockTimeoutError: ERR_LOCK_TIMEOUT after 30000 ms (attempt 6 of 5)
=========================== short test summary info ============================
FAILED tests/test_retry.py::test_retry_gives_up_after_timeout - retry.LockTimeoutError
1 failed, 1 passed in 0.42s"""

SAMPLE_DOCUMENTS: tuple[dict[str, Any], ...] = (
    {
        "kind": "turn",
        "createdAt": "2026-11-02T09:14:05.000Z",
        "messages": [
            {
                "key": "demo-u1",
                "role": "user",
                "timestamp": "2026-11-02T09:14:05.000Z",
                "text": "The retry loop in src/retry.py never gives up when the lock times out. "
                "Can you find out why? 日本語のログも確認してください 🔁",
            },
            {
                "key": "demo-a1",
                "role": "assistant",
                "timestamp": "2026-11-02T09:14:31.000Z",
                "text": "I'll run the retry tests first to see how run_with_retry behaves "
                "when acquire_lock keeps failing.",
            },
        ],
    },
    {
        "kind": "tool-result",
        "createdAt": "2026-11-02T09:14:40.000Z",
        "messages": [
            {
                "key": "demo-t1",
                "role": "toolResult",
                "toolName": "bash",
                "toolCallId": "call_pytest_1",
                "timestamp": "2026-11-02T09:14:40.000Z",
                "text": _TRACEBACK,
            }
        ],
    },
    {
        "kind": "turn",
        "createdAt": "2026-11-02T09:16:02.000Z",
        "messages": [
            {
                "key": "demo-a2",
                "role": "assistant",
                "timestamp": "2026-11-02T09:16:02.000Z",
                "text": "Found it: src/retry.py:42 compares attempt > max_attempts after "
                "incrementing, so the sixth attempt still runs. RetryPolicy should stop at "
                "attempt == max_attempts.",
            },
            {
                "key": "demo-u2",
                "role": "user",
                "timestamp": "2026-11-02T09:17:20.000Z",
                "text": "No, don't just fix the off-by-one. Use exponential backoff capped at "
                "30 s instead of the fixed sleep, and keep ERR_LOCK_TIMEOUT retryable.",
            },
            {
                "key": "demo-a3",
                "role": "assistant",
                "timestamp": "2026-11-02T09:19:45.000Z",
                "text": "Done in commit a1b2c3d4e5: RetryPolicy now sleeps min(2**attempt, 30) "
                "seconds and stops after max_attempts; tests/test_retry.py passes.",
            },
        ],
    },
    {
        "kind": "decision",
        "createdAt": "2026-11-02T09:20:00.000Z",
        "subjectKey": "retry-backoff-policy",
        "messages": [
            {
                "key": "demo-d1",
                "role": "custom",
                "text": "Decision: RetryPolicy uses exponential backoff capped at 30 s; "
                "ERR_LOCK_TIMEOUT stays retryable for at most max_attempts attempts.",
            }
        ],
    },
)


DEMO_QUERIES = ("ERR_LOCK_TIMEOUT", "why does the retry loop never give up")
DEMO_RELATION = "latest-correction"
DEMO_SEARCH_LIMIT = 2
DEMO_RECALL_TOKENS = 300

# The next day, a new session starts; preflight sees each of its user messages once. The clock is
# fixed so the sample stays within the automatic age limits whenever the demo runs.
DEMO_NEXT_DAY = "2026-11-03T09:00:00.000Z"
DEMO_MESSAGES = (
    ("demo-next-u1", "acquire_lock keeps failing in the upload worker too"),
    ("demo-next-u2", "remind me what went into commit a1b2c3d4e5"),
    ("demo-next-u3", "what does src/retry.py contain now?"),
)
DEMO_NEXT_SESSION = "demo-session-2"


def run_demo(archive: Archive) -> dict[str, Any]:
    """Admit the sample session, then search it and recall a hit; return all of it."""
    admitted = []
    for document in SAMPLE_DOCUMENTS:
        request = {"project": DEMO_PROJECT, "sessionId": DEMO_SESSION, **document}
        result = archive.admit(request)
        admitted.append({"kind": document["kind"], **result})
    tool_result = next(a for a in admitted if a["kind"] == "tool-result")
    # No search lease: the locators shown stay valid for as long as their documents do, so the
    # recall command printed with them works whenever it is typed.
    searches = [
        archive.search({"project": DEMO_PROJECT, "query": query, "limit": DEMO_SEARCH_LIMIT, "leaseSeconds": 0})
        for query in DEMO_QUERIES
    ]
    correction = archive.search({"project": DEMO_PROJECT, "relation": DEMO_RELATION, "leaseSeconds": 0})
    top = searches[0]["results"][0]
    hints = _next_day_hints(archive)
    return {
        "archive": str(archive.path),
        "project": DEMO_PROJECT,
        "admitted": admitted,
        "status": archive.status({"project": DEMO_PROJECT}),
        "example": archive.get({"documentId": tool_result["documentId"]}),
        "searches": searches,
        "correction": correction,
        "recall": archive.recall({"project": DEMO_PROJECT, "locator": top["locator"], "maxTokens": DEMO_RECALL_TOKENS}),
        "preflight": hints,
    }


def _next_day_hints(archive: Archive) -> list[dict[str, Any]]:
    """Preflight for the next day's messages (frozen: a second demo run replays the same bytes)."""
    clock = archive.clock
    archive.clock = lambda: DEMO_NEXT_DAY
    try:
        return [
            {
                "key": key,
                "text": text,
                **archive.call(
                    "preflight",
                    {
                        "project": DEMO_PROJECT,
                        "sessionId": DEMO_NEXT_SESSION,
                        "parentSessionId": DEMO_SESSION,
                        "messageKey": key,
                        "text": text,
                        "activeMessageKeys": [k for k, _ in DEMO_MESSAGES],
                    },
                ),
            }
            for key, text in DEMO_MESSAGES
        ]
    finally:
        archive.clock = clock
