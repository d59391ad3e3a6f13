"""Every size and count limit of the contract, in one place (docs/contract.md lists them)."""

KIB = 1024
UNBOUNDED = 1 << 62  # a count limit that never binds ("all of them"), as an integer SQL accepts
MIB = 1024 * KIB

# Admission
MAX_DOCUMENT_BYTES = 8 * MIB  # serialized document text
MAX_SOURCE_MESSAGES = 256  # source message keys per document
MAX_METADATA_BYTES = 1 * MIB  # metadata object, as compact JSON
MAX_METADATA_DEPTH = 32
MAX_PROJECT_CHARS = 4096
MAX_SESSION_ID_CHARS = 256
MAX_LINEAGE_DEPTH = 16
MAX_DOCTOR_SAMPLE = 100_000  # documents and windows `doctor` checks against their digests  # ancestors a host may name when it opens a session
MAX_MESSAGE_KEY_CHARS = 512
MAX_TOOL_NAME_CHARS = 256
MAX_TOOL_CALL_ID_CHARS = 512
MAX_SUBJECT_KEY_CHARS = 512
MAX_DOCUMENT_ID_CHARS = 128
MAX_VERSION = 2**31  # a document version number
MAX_TIMESTAMP_CHARS = 64

# Chunking: content-addressed pieces of a document's bytes
MAX_CHUNK_BYTES = 64 * KIB
CHUNK_NEWLINE_AFTER = 16 * KIB  # once a chunk holds this much, it ends at the last newline that fits

# Direct reads (get)
GET_INLINE_SOURCE_BYTES = 1 * MIB  # larger sources answer with a manifest instead of text
GET_MAX_RESULT_BYTES = 8 * MIB  # serialized result bound for an inline answer
GET_MANIFEST_CHUNKS = 256  # chunk occurrences listed in a manifest-only answer
GET_MANIFEST_MESSAGES = 16  # message keys listed in a manifest-only answer
GET_MAX_RANGE_BYTES = 1 * MIB  # one byte-range read

# Transport
MAX_REQUEST_BYTES = 64 * MIB  # one `cwa call` body or one `cwa serve` line
MAX_JSON_DEPTH = 128  # nesting of arrays and objects in one request, its envelope included

# Search and recall
MAX_QUERY_CHARS = 65_536
MAX_VISIBLE_KEYS = 1000  # excludeVisibleSourceKeys entries
MAX_VISIBLE_KEY_BYTES = 1 * MIB  # and their total size
MAX_SEARCH_LIMIT = 100
SEARCH_INDEX_SECONDS = 2.0  # the most a search or gather spends indexing queued documents first
MAX_RECALL_NEIGHBORS = 32
DEFAULT_RECALL_NEIGHBORS = 1  # windows on each side of a recalled window
MIN_RECALL_TOKENS = 39
MAX_RECALL_TOKENS = 200_000
DEFAULT_RECALL_TOKENS = 2000
MAX_LEASE_SECONDS = 86_400
MAX_LOCATOR_CHARS = 4096

# Preflight budgets: bounds of the settings and of a request's `policy` overrides alike
MAX_HINT_BUDGET_TOKENS = 4_000
MAX_ACTIVE_HINT_BUDGET_TOKENS = 64_000
MAX_COOLDOWN_HOURS = 8_760
# Preflight
MAX_ACTIVE_KEYS = 1000  # activeMessageKeys entries
PREFLIGHT_QUERY_CHARS = 16_384  # of a longer message, only this prefix is read as the query

# Gather and traverse
MAX_GATHER_ANCHORS = 10
DEFAULT_GATHER_ANCHORS = 5
MAX_GATHER_BEFORE = 8
MAX_GATHER_AFTER = 16
MAX_GATHER_EVIDENCE = 24
DEFAULT_GATHER_EVIDENCE = 12
DEFAULT_GATHER_TOKENS = 2_000
MIN_PACKET_TOKENS = 200  # a packet's maxTokens: room for its header and one shortened record
MAX_PACKET_TOKENS = 200_000
MAX_TRAVERSE_PAGE = 128
DEFAULT_TRAVERSE_PAGE = 20
MAX_TRAVERSE_SCAN = 10_000
DEFAULT_TRAVERSE_SCAN = 2_048
DEFAULT_TRAVERSE_TOKENS = 4_000
MAX_CURSOR_CHARS = 1024

# Session engine
MAX_SESSION_MESSAGES = 200_000  # transcript messages in one session-* request
MAX_CONTEXT_WINDOW = 100_000_000  # a model's context window or output limit, in tokens
MAX_DIGEST_CHARS = 64

# Maintenance
DEFAULT_MAINTENANCE_STEPS = 500  # rows each task may touch in one pass
MAX_MAINTENANCE_STEPS = 100_000
MAX_EMBED_WINDOWS = 10_000_000  # window contents one `index-embed` call may embed
MAX_PROTECTED_VERSIONS = 1000  # document versions in one `protect` request
MAX_CLIENT_ID_CHARS = 256
MAX_PROTECTION_SECONDS = 7 * 86_400


# Numbers shown in `--help`, kept here so that the command line starts without importing the
# modules that apply them (cwa/session/checkpoint.py, cwa/store/maintenance.py, cwa/model_variants.py).
CHECKPOINT_PREVIEW_TOKENS = 800  # a checkpoint's head-and-tail preview
CHECKPOINT_CATALOG_TOKENS = 1000  # the session's checkpoint catalog
MAINTENANCE_INTERVAL_SECONDS = 600  # between the passes `cwa serve` runs
VARIANT_MIN_SPEEDUP = 1.2  # `cwa models optimize` keeps the runtime embedding graph only this much faster
VARIANT_MIN_COSINE = 0.98  # and with vectors at least this close to the installed model's
