"""The closed sets of names the archive understands, and the defaults tied to them."""

KINDS = (
    "turn",
    "tool-result",
    "preamble",
    "decision",
    "manual",
    "checkpoint-root",
    "checkpoint-part",
    "summary",
)

RETENTION_CLASSES = ("ephemeral", "conversation", "derived", "durable")

# A kind's retention class when the request names none: tool payloads are the cheapest to lose,
# what the user typed is conversation, a summary is derived from other sources, and a decision or
# a manual note is kept until someone removes it.
DEFAULT_CLASS_FOR_KIND = {
    "turn": "conversation",
    "tool-result": "ephemeral",
    "preamble": "conversation",
    "decision": "durable",
    "manual": "durable",
    "checkpoint-root": "conversation",
    "checkpoint-part": "conversation",
    "summary": "derived",
}

ROLES = (
    "user",
    "assistant",
    "toolResult",
    "bashExecution",
    "compactionSummary",
    "branchSummary",
    "custom",
)

DOCUMENT_STATES = ("live", "superseded", "tombstoned", "expired")

INDEX_OUTCOMES = ("complete", "partial", "skipped")
