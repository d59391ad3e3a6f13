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

# A document's state: `superseded` keeps its bytes (recall says so, never substitutes the
# replacement); `expired` (retention) and `tombstoned` (redaction) keep only the header row.
READABLE_STATES = ("live", "superseded")
GONE_STATES = ("expired", "tombstoned")

# What a derived-index handler did for one document (cwa/store/derived.py).
INDEX_OUTCOMES = ("complete", "partial", "skipped")

# Structural cues scored per message (cwa/index/structure.py); each names a search relation.
CUES = ("question", "request", "correction", "answer", "decision")
RELATIONS = {f"latest-{cue}": cue for cue in CUES}  # relation name → its cue

SCOPES = ("session", "project", "all")  # where a search or gather may look
GATHER_INTENTS = ("auto", "state", "workflow")  # how much of what followed each match gather shows
DIRECTIONS = ("before", "after")  # of a walk through a session's chronology

# The MCP clients `cwa mcp install` writes the server entry for
MCP_CLIENTS = ("claude", "codex", "opencode")
HOOK_HOSTS = ("claude", "codex", "opencode")  # clients cwa captures through their hooks or plugins
CAPTURE_HOSTS = ("claude", "codex", "opencode", "pi")  # clients whose past sessions `cwa import` reads

# The agent hosts that call the archive's tools (routing.json names the tools each offers)
HOSTS = ("pi", "mcp")

# What automatic preflight decided for a user message (the hint ledger stores it).
SNIPPET = "historical-snippet"
MARKER = "continuity-marker"
SUPPRESS = "suppress"
