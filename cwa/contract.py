"""The JSON contract: declarative request schemas, validated before any work is done.

A schema is a tree of small field specs. `validate(schema, params)` either returns a normalized
copy (defaults filled, timestamps canonical, explicit nulls of optional fields dropped) or raises
`InvalidRequest` / `LimitExceeded` naming the offending field path. Python callers, `cwa call`
and `cwa serve` all pass through here, so they reject the same payloads the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from cwa import limits
from cwa.config import BY_KEY
from cwa.errors import InvalidRequest, LimitExceeded
from cwa.json_input import check_depth
from cwa.session.budget import SESSION_KEYS
from cwa.timestamps import OutOfRange, parse_timestamp
from cwa.vocabulary import DIRECTIONS, GATHER_INTENTS, HOSTS, KINDS, RELATIONS, RETENTION_CLASSES, ROLES, SCOPES


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _wrong_type(path: str, expected: str, value: Any) -> InvalidRequest:
    return InvalidRequest(
        f"{path} must be {expected}, not {_type_name(value)}",
        field=path,
        reason="wrong-type",
        expected=expected,
    )


def _too_large(path: str, size: int, limit: int, message: str) -> LimitExceeded:
    return LimitExceeded(message, field=path, reason="too-large", limit=limit, size=size)


class Spec:
    def check(self, value: Any, path: str) -> Any:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class Str(Spec):
    min_len: int = 0
    max_len: int = 4096
    limit: bool = False  # over max_len is `limit-exceeded` rather than `invalid-request`

    def check(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise _wrong_type(path, "a string", value)
        if len(value) > self.max_len:
            error = LimitExceeded if self.limit else InvalidRequest
            raise error(
                f"{path} is longer than {self.max_len} characters",
                field=path,
                reason="too-long",
                limit=self.max_len,
                size=len(value),
            )
        if len(value) < self.min_len:
            raise InvalidRequest(
                f"{path} must not be empty" if self.min_len == 1 else f"{path} is too short",
                field=path,
                reason="too-short",
                minimum=self.min_len,
            )
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidRequest(
                f"{path} is not valid Unicode text (unpaired surrogate)",
                field=path,
                reason="invalid-unicode",
            ) from exc
        return value


@dataclass(frozen=True)
class Int(Spec):
    minimum: int | None = None
    maximum: int | None = None
    kinds: tuple[type, ...] = (int,)
    expected: str = "an integer"

    def check(self, value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, self.kinds):
            raise _wrong_type(path, self.expected, value)
        if (self.minimum is not None and value < self.minimum) or (self.maximum is not None and value > self.maximum):
            raise InvalidRequest(
                f"{path} must be between {self.minimum} and {self.maximum}",
                field=path,
                reason="out-of-range",
                minimum=self.minimum,
                maximum=self.maximum,
            )
        return value


def Fraction() -> Int:
    """A number (integer or not) between 0 and 1."""
    return Int(0, 1, kinds=(int, float), expected="a number")


@dataclass(frozen=True)
class Bool(Spec):
    def check(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise _wrong_type(path, "a boolean", value)
        return value


@dataclass(frozen=True)
class Enum(Spec):
    values: tuple[str, ...]

    def check(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise _wrong_type(path, "a string", value)
        if value not in self.values:
            raise InvalidRequest(
                f"{path} must be one of {', '.join(self.values)}",
                field=path,
                reason="not-allowed",
                allowed=list(self.values),
            )
        return value


@dataclass(frozen=True)
class Timestamp(Spec):
    """ISO-8601 text or integer epoch milliseconds; normalized to canonical UTC text."""

    def check(self, value: Any, path: str) -> str:
        if isinstance(value, str) and len(value) > limits.MAX_TIMESTAMP_CHARS:
            raise InvalidRequest(f"{path} is too long for a timestamp", field=path, reason="too-long")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise _wrong_type(path, "an ISO-8601 string or epoch milliseconds", value)
        try:
            return parse_timestamp(value)
        except OutOfRange as exc:
            raise InvalidRequest(f"{path}: {exc}", field=path, reason="out-of-range") from exc
        except ValueError as exc:
            raise InvalidRequest(
                f"{path} is not a valid timestamp: {exc}",
                field=path,
                reason="bad-timestamp",
            ) from exc


@dataclass(frozen=True)
class JsonObject(Spec):
    """A free-form JSON object, bounded by its compact serialized size and nesting depth."""

    max_bytes: int
    max_depth: int

    def check(self, value: Any, path: str) -> dict:
        if not isinstance(value, dict):
            raise _wrong_type(path, "an object", value)
        _check_json_value(value, path, 0, self.max_depth)
        size = len(orjson.dumps(value))
        if size > self.max_bytes:
            raise _too_large(
                path, size, self.max_bytes, f"{path} is {size} bytes as JSON; the limit is {self.max_bytes}"
            )
        return value


def _check_json_value(value: Any, path: str, depth: int, max_depth: int) -> None:
    if depth > max_depth:
        raise InvalidRequest(f"{path} nests deeper than {max_depth}", field=path, reason="too-deep")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise _wrong_type(f"{path} key", "a string", key)
            Str(max_len=limits.MAX_METADATA_BYTES).check(key, f"{path}.{key}")
            _check_json_value(item, f"{path}.{key}", depth + 1, max_depth)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_json_value(item, f"{path}[{index}]", depth + 1, max_depth)
    elif isinstance(value, str):
        Str(max_len=limits.MAX_METADATA_BYTES).check(value, path)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidRequest(f"{path} is not a finite number", field=path, reason="not-finite")
    elif value is not None and not isinstance(value, (bool, int)):
        raise _wrong_type(path, "a JSON value", value)


@dataclass(frozen=True)
class Field:
    spec: Spec
    required: bool = False
    default: Any = None  # a value, or a zero-argument callable


@dataclass(frozen=True)
class Obj(Spec):
    """An object of known fields. `exactly_one` / `at_least_one` name fields of which exactly
    one / at least one must be given; `requires` maps a field to those it needs beside it. With
    `nulls=False` (JSON Schema's reading) an explicit null is a wrong type, not an absent field."""

    fields: dict[str, Field]
    exactly_one: tuple[str, ...] = ()
    at_least_one: tuple[str, ...] = ()
    requires: tuple[tuple[str, tuple[str, ...]], ...] = ()
    nulls: bool = True

    def check(self, value: Any, path: str) -> dict:
        if not isinstance(value, dict):
            raise _wrong_type(path, "an object", value)
        unknown = sorted(set(value) - set(self.fields))
        if unknown:
            where = _field_path(path, unknown[0])
            raise InvalidRequest(
                f"unknown field {where}",
                field=where,
                reason="unknown-field",
                allowed=sorted(self.fields),
            )
        result: dict[str, Any] = {}
        for name, spec in self.fields.items():
            where = _field_path(path, name)
            item = value.get(name)
            if item is None and not self.nulls and name in value:
                spec.spec.check(item, where)  # every spec refuses null as a wrong type
            if item is None:
                if spec.required:
                    raise InvalidRequest(f"{where} is required", field=where, reason="missing")
                default = spec.default() if callable(spec.default) else spec.default
                if default is not None:
                    result[name] = default
                continue
            result[name] = spec.spec.check(item, where)
        self._check_together(value, path)
        return result

    def _check_together(self, value: dict, path: str) -> None:
        given = [name for name in self.exactly_one if value.get(name) is not None]
        if self.exactly_one and len(given) != 1:
            names = _alternatives(self.exactly_one, "or")
            where = _field_path(path, self.exactly_one[0])
            raise InvalidRequest(f"give exactly one of {names}", field=where, reason="missing", given=given)
        if self.at_least_one and all(value.get(name) is None for name in self.at_least_one):
            names = _alternatives(self.at_least_one, "or")
            where = _field_path(path, self.at_least_one[0])
            several = "both" if len(self.at_least_one) == 2 else "several"
            raise InvalidRequest(f"give {names}, or {several}", field=where, reason="missing")
        for name, needed in self.requires:
            missing = [other for other in needed if value.get(name) is not None and value.get(other) is None]
            if missing:
                where = _field_path(path, missing[0])
                raise InvalidRequest(f"{where} is required with {name}", field=where, reason="missing")


def _field_path(path: str, name: str) -> str:
    return name if path == "params" else f"{path}.{name}"


def _alternatives(names: tuple[str, ...], word: str) -> str:
    return ", ".join(names[:-1]) + f" {word} {names[-1]}" if len(names) > 1 else names[0]


@dataclass(frozen=True)
class List(Spec):
    """An array; `max_bytes` bounds the UTF-8 bytes of its string items together."""

    item: Spec
    min_items: int = 0
    max_items: int = 1000
    max_bytes: int | None = None

    def check(self, value: Any, path: str) -> list:
        if not isinstance(value, list):
            raise _wrong_type(path, "an array", value)
        if len(value) > self.max_items:
            raise LimitExceeded(
                f"{path} has {len(value)} items; the limit is {self.max_items}",
                field=path,
                reason="too-many",
                limit=self.max_items,
                size=len(value),
            )
        if len(value) < self.min_items:
            raise InvalidRequest(
                f"{path} needs at least {self.min_items} item(s)",
                field=path,
                reason="too-few",
                minimum=self.min_items,
            )
        checked = [self.item.check(item, f"{path}[{index}]") for index, item in enumerate(value)]
        if self.max_bytes is not None:
            size = sum(len(item.encode("utf-8")) for item in checked if isinstance(item, str))
            if size > self.max_bytes:
                raise _too_large(path, size, self.max_bytes, f"{path} is over {self.max_bytes} bytes")
        return checked


@dataclass(frozen=True)
class PiMessage(Spec):
    """One message of a host transcript: an object with a known role. Its fields are read (and
    their types checked) by cwa/session/transcript.py; the object is passed on unchanged."""

    def check(self, value: Any, path: str) -> dict:
        if not isinstance(value, dict):
            raise _wrong_type(path, "an object", value)
        role = value.get("role")
        if role not in ROLES:
            raise InvalidRequest(
                f"{path}.role must be one of {', '.join(ROLES)}",
                field=f"{path}.role",
                reason="not-allowed",
                allowed=list(ROLES),
            )
        return value


@dataclass(frozen=True)
class CheckedLater(Spec):
    """An object whose fields another schema checks: a method's params, a tool's arguments."""

    def check(self, value: Any, path: str) -> dict:
        if not isinstance(value, dict):
            raise _wrong_type(path, "an object", value)
        return value


@dataclass(frozen=True)
class SettingValue(Spec):
    """A value for one configuration key, checked by that key's own rule (cwa/config.py)."""

    key: str

    def check(self, value: Any, path: str) -> Any:
        try:
            return BY_KEY[self.key].check(value)
        except ValueError as exc:
            raise InvalidRequest(f"{path} {exc}", field=path, reason="out-of-range") from exc


def from_json_schema(schema: dict[str, Any], **rules: Any) -> Spec:
    """The contract spec for a JSON Schema of the subset agent tools use (routing.json): objects
    without extra properties, strings, integers, booleans, enums and arrays, with their bounds.
    `rules` are an object's Obj options (exactly_one, ...). Anything else is a programming
    error, raised at once rather than checked loosely."""
    kind = schema.get("type")
    if "enum" in schema:
        return Enum(tuple(schema["enum"]))
    if kind == "object":
        if schema.get("additionalProperties", True) is not False:
            raise ValueError("a tool's object parameters must set additionalProperties: false")
        required = set(schema.get("required", ()))
        fields = {
            name: Field(from_json_schema(item), required=name in required)
            for name, item in schema.get("properties", {}).items()
        }
        return Obj(fields, nulls=False, **rules)
    if kind == "string":
        return Str(schema.get("minLength", 0), schema.get("maxLength", limits.MAX_DOCUMENT_BYTES))
    if kind == "integer":
        return Int(schema.get("minimum"), schema.get("maximum"))
    if kind == "boolean":
        return Bool()
    if kind == "array":
        return List(from_json_schema(schema["items"]), schema.get("minItems", 0), schema.get("maxItems", 1000))
    raise ValueError(f"JSON Schema type {kind!r} is not one the contract reads")


# --- method schemas -------------------------------------------------------------------------

# The message keys a host's prompt still shows (search, gather and preflight leave them out)
VISIBLE_KEYS = List(
    Str(1, limits.MAX_MESSAGE_KEY_CHARS), 0, limits.MAX_VISIBLE_KEYS, max_bytes=limits.MAX_VISIBLE_KEY_BYTES
)

MESSAGE = Obj(
    {
        "key": Field(Str(1, limits.MAX_MESSAGE_KEY_CHARS)),
        "role": Field(Enum(ROLES), required=True),
        "text": Field(Str(0, limits.MAX_DOCUMENT_BYTES, limit=True), required=True),
        "toolName": Field(Str(1, limits.MAX_TOOL_NAME_CHARS)),
        "toolCallId": Field(Str(1, limits.MAX_TOOL_CALL_ID_CHARS)),
        "timestamp": Field(Timestamp()),
    }
)

DOCUMENT_REF = Obj(
    {
        "documentId": Field(Str(1, limits.MAX_DOCUMENT_ID_CHARS), required=True),
        "version": Field(Int(1, limits.MAX_VERSION), required=True),
    }
)

ADMIT = Obj(
    {
        "project": Field(Str(1, limits.MAX_PROJECT_CHARS), required=True),
        "sessionId": Field(Str(1, limits.MAX_SESSION_ID_CHARS), required=True),
        "parentSessionId": Field(Str(1, limits.MAX_SESSION_ID_CHARS)),
        "kind": Field(Enum(KINDS), required=True),
        "retentionClass": Field(Enum(RETENTION_CLASSES)),
        "createdAt": Field(Timestamp()),
        "messages": Field(List(MESSAGE, 1, limits.MAX_SOURCE_MESSAGES), required=True),
        "subjectKey": Field(Str(1, limits.MAX_SUBJECT_KEY_CHARS)),
        "supersedes": Field(DOCUMENT_REF),
        "metadata": Field(JsonObject(limits.MAX_METADATA_BYTES, limits.MAX_METADATA_DEPTH)),
    }
)

BYTE_RANGE = Obj(
    {
        "start": Field(Int(0, limits.MAX_DOCUMENT_BYTES), required=True),
        "end": Field(Int(0, limits.MAX_DOCUMENT_BYTES), required=True),
    }
)

# A caller bound to a project (every agent host: serve, MCP) names it on each method that names a
# document; another project's document is then answered exactly as an unknown id is.
BOUND_PROJECT = Field(Str(1, limits.MAX_PROJECT_CHARS))

GET = Obj(
    {
        "documentId": Field(Str(1, limits.MAX_DOCUMENT_ID_CHARS), required=True),
        "version": Field(Int(1, limits.MAX_VERSION)),
        "range": Field(BYTE_RANGE),
        "project": BOUND_PROJECT,
    }
)

STATUS = Obj({"project": Field(Str(1, limits.MAX_PROJECT_CHARS)), "archive": Field(Bool())})

SEMANTIC_POLICIES = ("auto", "always", "never")
RANKERS = ("learned", "fused")

SEARCH = Obj(
    {
        "render": Field(Bool()),
        "query": Field(Str(1, limits.MAX_QUERY_CHARS, limit=True)),
        "relation": Field(Enum(tuple(RELATIONS))),
        "scope": Field(Enum(SCOPES), default="project"),
        "sessionId": Field(Str(1, limits.MAX_SESSION_ID_CHARS)),
        "project": Field(Str(1, limits.MAX_PROJECT_CHARS)),
        "limit": Field(Int(1, limits.MAX_SEARCH_LIMIT)),
        "excludeVisibleSourceKeys": Field(VISIBLE_KEYS),
        "hintBudgetTokens": Field(Int(0, limits.MAX_HINT_BUDGET_TOKENS)),
        "leaseSeconds": Field(Int(0, limits.MAX_LEASE_SECONDS)),
        "semanticPolicy": Field(Enum(SEMANTIC_POLICIES)),
        "expansion": Field(Bool()),
        "neighborCredit": Field(Fraction()),
        "ranker": Field(Enum(RANKERS)),
        "explain": Field(Bool()),
        "rerank": Field(Bool()),
    },
    at_least_one=("query", "relation"),
)

GATHER = Obj(
    {
        "query": Field(Str(1, limits.MAX_QUERY_CHARS, limit=True), required=True),
        "intent": Field(Enum(GATHER_INTENTS), default="auto"),
        "scope": Field(Enum(SCOPES), default="project"),
        "sessionId": Field(Str(1, limits.MAX_SESSION_ID_CHARS)),
        "project": Field(Str(1, limits.MAX_PROJECT_CHARS)),
        "limit": Field(Int(1, limits.MAX_GATHER_ANCHORS)),
        "before": Field(Int(0, limits.MAX_GATHER_BEFORE)),
        "after": Field(Int(0, limits.MAX_GATHER_AFTER)),
        "maxEvidence": Field(Int(1, limits.MAX_GATHER_EVIDENCE)),
        "maxTokens": Field(Int(limits.MIN_PACKET_TOKENS, limits.MAX_PACKET_TOKENS)),
        "excludeVisibleSourceKeys": Field(VISIBLE_KEYS),
    }
)

TRAVERSE = Obj(
    {
        "project": Field(Str(1, limits.MAX_PROJECT_CHARS), required=True),
        "locator": Field(Str(1, limits.MAX_LOCATOR_CHARS)),
        "documentId": Field(Str(1, limits.MAX_DOCUMENT_ID_CHARS)),
        "version": Field(Int(1, limits.MAX_VERSION)),
        "cursor": Field(Str(1, limits.MAX_CURSOR_CHARS)),
        "direction": Field(Enum(DIRECTIONS)),
        "limit": Field(Int(1, limits.MAX_TRAVERSE_PAGE)),
        "scanLimit": Field(Int(1, limits.MAX_TRAVERSE_SCAN)),
        "maxTokens": Field(Int(limits.MIN_PACKET_TOKENS, limits.MAX_PACKET_TOKENS)),
    },
    exactly_one=("locator", "documentId", "cursor"),
)

RECALL = Obj(
    {
        "render": Field(Bool()),
        "locator": Field(Str(1, limits.MAX_LOCATOR_CHARS)),
        "documentId": Field(Str(1, limits.MAX_DOCUMENT_ID_CHARS)),
        "version": Field(Int(1, limits.MAX_VERSION)),
        "project": BOUND_PROJECT,
        "sessionIds": Field(List(Str(1, limits.MAX_SESSION_ID_CHARS), 0, limits.MAX_VISIBLE_KEYS)),
        "neighbors": Field(Int(0, limits.MAX_RECALL_NEIGHBORS)),
        "maxTokens": Field(Int(limits.MIN_RECALL_TOKENS, limits.MAX_RECALL_TOKENS)),
    },
    exactly_one=("locator", "documentId"),
)

OPTIONAL_REF = Obj(
    {
        "documentId": Field(Str(1, limits.MAX_DOCUMENT_ID_CHARS), required=True),
        "version": Field(Int(1, limits.MAX_VERSION)),
    }
)

# Retire a document in favour of another (`by`), or of a note archived in its place (`note`: a
# `decision` document of the naming session)
SUPERSEDE = Obj(
    {
        "documentId": Field(Str(1, limits.MAX_DOCUMENT_ID_CHARS), required=True),
        "version": Field(Int(1, limits.MAX_VERSION)),
        "by": Field(OPTIONAL_REF),
        "note": Field(Str(1, limits.MAX_QUERY_CHARS, limit=True)),
        "project": BOUND_PROJECT,
        "sessionId": Field(Str(1, limits.MAX_SESSION_ID_CHARS)),
        "parentSessionId": Field(Str(1, limits.MAX_SESSION_ID_CHARS)),
    },
    exactly_one=("by", "note"),
    requires=(("note", ("project", "sessionId")),),
)

INDEX_REBUILD = Obj({})

INDEX_EMBED = Obj({"limit": Field(Int(1, limits.MAX_EMBED_WINDOWS))})

MODELS_STATUS = Obj({})

MODELS_OPTIMIZE = Obj({})

PIN = Obj({**OPTIONAL_REF.fields, "project": BOUND_PROJECT})

CHECKPOINT = Obj(
    {
        "project": Field(Str(1, limits.MAX_PROJECT_CHARS), required=True),
        "sessionId": Field(Str(1, limits.MAX_SESSION_ID_CHARS), required=True),
        "text": Field(Str(1, limits.MAX_REQUEST_BYTES, limit=True), required=True),
        "createdAt": Field(Timestamp()),
        "previousSummary": Field(Str(1, limits.MAX_DOCUMENT_BYTES, limit=True)),
    }
)

CATALOG = Obj(
    {
        "project": Field(Str(1, limits.MAX_PROJECT_CHARS), required=True),
        "sessionId": Field(Str(1, limits.MAX_SESSION_ID_CHARS), required=True),
    }
)

PROTECT = Obj(
    {
        "clientId": Field(Str(1, limits.MAX_CLIENT_ID_CHARS), required=True),
        "documents": Field(List(OPTIONAL_REF, 0, limits.MAX_PROTECTED_VERSIONS), required=True),
        "ttlSeconds": Field(Int(1, limits.MAX_PROTECTION_SECONDS)),
        "project": BOUND_PROJECT,
    }
)

RELEASE = Obj({"clientId": Field(Str(1, limits.MAX_CLIENT_ID_CHARS), required=True)})

REDACT = Obj(
    {
        "project": Field(Str(1, limits.MAX_PROJECT_CHARS), required=True),
        "sessionId": Field(Str(1, limits.MAX_SESSION_ID_CHARS)),
        "confirm": Field(Str(1, 64)),
    }
)

TRANSCRIPT = List(PiMessage(), 0, limits.MAX_SESSION_MESSAGES)

SESSION_SCOPE = {
    "project": Field(Str(1, limits.MAX_PROJECT_CHARS), required=True),
    "sessionId": Field(Str(1, limits.MAX_SESSION_ID_CHARS), required=True),
    "parentSessionId": Field(Str(1, limits.MAX_SESSION_ID_CHARS)),
}

MODEL = Obj(
    {
        "id": Field(Str(0, 1024)),
        "provider": Field(Str(0, 1024)),
        "contextWindow": Field(Int(0, limits.MAX_CONTEXT_WINDOW)),
        "maxTokens": Field(Int(0, limits.MAX_CONTEXT_WINDOW)),
    }
)

SESSION_CONTEXT = Obj(
    {
        **SESSION_SCOPE,
        "model": Field(MODEL),
        "reserveTokens": Field(Int(0, limits.MAX_CONTEXT_WINDOW)),
        "messages": Field(TRANSCRIPT, required=True),
        "baseDigest": Field(Str(1, limits.MAX_DIGEST_CHARS)),
        "answer": Field(Enum(("full", "delta")), default="full"),
        "settings": Field(Obj({key: Field(SettingValue(key)) for key in SESSION_KEYS})),
    }
)

SESSION_SETTLED = Obj(
    {
        **SESSION_SCOPE,
        "aborted": Field(Bool()),
        "messages": Field(TRANSCRIPT),
        "baseDigest": Field(Str(1, limits.MAX_DIGEST_CHARS)),
    }
)

SESSION_COMPACT = Obj(
    {
        **SESSION_SCOPE,
        "messagesToSummarize": Field(TRANSCRIPT, required=True),
        "turnPrefixMessages": Field(TRANSCRIPT),
        "isSplitTurn": Field(Bool()),
        "previousSummary": Field(Str(1, limits.MAX_DOCUMENT_BYTES, limit=True)),
        "previousDetails": Field(JsonObject(limits.MAX_METADATA_BYTES, limits.MAX_METADATA_DEPTH)),
        "reason": Field(Enum(("manual", "threshold", "overflow"))),
        "tokensBefore": Field(Int(0, limits.MAX_CONTEXT_WINDOW)),
        "firstKeptEntryId": Field(Str(0, 1024)),
    }
)

SESSION_STATUS = Obj(
    {
        **SESSION_SCOPE,
        "messages": Field(TRANSCRIPT),  # counted against the recorded epoch, when no engine holds it
        "model": Field(MODEL),
        "reserveTokens": Field(Int(0, limits.MAX_CONTEXT_WINDOW)),
    }
)

SESSION_ROTATE = Obj({**SESSION_SCOPE})

SESSION_OPEN = Obj(
    {
        "project": SESSION_SCOPE["project"],
        "sessionId": SESSION_SCOPE["sessionId"],
        "lineage": Field(List(Str(1, limits.MAX_SESSION_ID_CHARS), 0, limits.MAX_LINEAGE_DEPTH)),
    }
)

# One agent tool call (cwa/agent_tools.py): its arguments are checked against the tool's own
# parameters once the tool is known
TOOL = Obj(
    {
        **SESSION_SCOPE,
        "host": Field(Enum(HOSTS), required=True),
        "name": Field(Str(1, limits.MAX_TOOL_NAME_CHARS), required=True),
        "arguments": Field(CheckedLater(), default=dict),
    }
)

PREFLIGHT_POLICY = Obj(
    {
        "hintBudgetTokens": Field(Int(0, limits.MAX_HINT_BUDGET_TOKENS)),
        "activeHintBudgetTokens": Field(Int(0, limits.MAX_ACTIVE_HINT_BUDGET_TOKENS)),
        "hintSourceCooldownHours": Field(Int(0, limits.MAX_COOLDOWN_HOURS)),
        "snippets": Field(Bool()),
        "markers": Field(Bool()),
        "snippetMinShare": Field(Fraction()),
        "markerMinShare": Field(Fraction()),
    }
)

PREFLIGHT = Obj(
    {
        "project": Field(Str(1, limits.MAX_PROJECT_CHARS), required=True),
        "sessionId": Field(Str(1, limits.MAX_SESSION_ID_CHARS), required=True),
        "parentSessionId": Field(Str(1, limits.MAX_SESSION_ID_CHARS)),
        "messageKey": Field(Str(1, limits.MAX_MESSAGE_KEY_CHARS), required=True),
        "text": Field(Str(0, limits.MAX_DOCUMENT_BYTES, limit=True), required=True),
        "activeMessageKeys": Field(List(Str(1, limits.MAX_MESSAGE_KEY_CHARS), 0, limits.MAX_ACTIVE_KEYS)),
        "excludeVisibleSourceKeys": Field(VISIBLE_KEYS),
        "policy": Field(PREFLIGHT_POLICY),
    }
)

WHY = Obj(
    {
        "project": Field(Str(1, limits.MAX_PROJECT_CHARS), required=True),
        "sessionId": Field(Str(1, limits.MAX_SESSION_ID_CHARS), required=True),
        "messageKey": Field(Str(1, limits.MAX_MESSAGE_KEY_CHARS)),
    }
)

DOCTOR = Obj({"repair": Field(Bool()), "sample": Field(Int(1, limits.MAX_DOCTOR_SAMPLE))})

MAINTAIN = Obj(
    {
        "limit": Field(Int(1, limits.MAX_MAINTENANCE_STEPS)),
        "vacuum": Field(Bool()),
        "embed": Field(Int(0, limits.MAX_MAINTENANCE_STEPS)),
    }
)


# --- the envelope of one `cwa serve` line ----------------------------------------------------

MAX_ID_CHARS = 256  # a request id is echoed back in the reply: bounded, so a reply stays small


@dataclass(frozen=True)
class RequestId(Spec):
    def check(self, value: Any, path: str) -> str | int:
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise InvalidRequest("id must be a string or an integer", field="id", reason="wrong-type")
        if isinstance(value, str) and len(value) > MAX_ID_CHARS:
            raise InvalidRequest(
                f"id is longer than {MAX_ID_CHARS} characters", field="id", reason="too-long", limit=MAX_ID_CHARS
            )
        return value


ENVELOPE = Obj(
    {
        "id": Field(RequestId()),
        "method": Field(Str(0, limits.MAX_REQUEST_BYTES), required=True),  # unknown: the method table says so
        "params": Field(CheckedLater()),  # an object, checked by the method's own schema
    }
)


def check_project_bound(method: str, schema: Obj, params: Any) -> None:
    """An agent works through serve within its own project: a method that names a document (its
    schema's `project` is BOUND_PROJECT) must name the caller's project too, and another project's
    document is then answered as an unknown id. `cwa get` and the human CLI stay the owner's direct
    access to the whole file."""
    if schema.fields.get("project") is BOUND_PROJECT and isinstance(params, dict) and not params.get("project"):
        raise InvalidRequest(
            f"{method} from an agent host needs the caller's project", field="project", reason="missing"
        )


def validate(schema: Obj, params: Any) -> dict[str, Any]:
    """Validate `params` against `schema`; return the normalized request. Nesting is bounded
    first, for every host alike: a value no code below may walk or write back is refused here."""
    check_depth(params, "params", field="params")
    return schema.check(params, "params")


# A method's schema and its implementation: `handler(archive, normalized_params) -> result`.
MethodHandler = Callable[[Any, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Method:
    name: str
    schema: Obj
    handler: MethodHandler
    summary: str = ""
