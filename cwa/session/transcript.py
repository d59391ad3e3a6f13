"""A host's transcript as the engine sees it: Pi messages, their text, keys and interaction groups.

Pi's roles (docs/session.md): `user` and `custom` (text or text/image blocks), `assistant` (text,
thinking and toolCall blocks), `toolResult`, `bashExecution` (command and output),
`compactionSummary` and `branchSummary` (summary text). Each message gets:
- a deterministic serialization (`message_text`): the text an archive document stores for it;
  images become a placeholder naming their type, size and hash, never their base64;
- a stable key: `derive_message_key` of the store (role, timestamp, tool call id and the blake3
  of the serialization), so the engine, the archive and every replay agree on it;
- a sizing estimate, characters / 4 (`sizing_tokens`): cheap enough to run on every model call.
  Hints and recall keep the conservative estimator (cwa/tokens.py). Whatever else of a message
  reaches the provider copy — extra fields, blocks of a type the engine does not read, a block's
  own extra fields (a thinking signature) — is counted by its JSON bytes beyond UNCOUNTED_SLACK
  (what a host's own bookkeeping on a message, such as Pi's usage figures, costs), so no part of a
  message passes uncounted.

A message the engine replaces (a preview, a dedup marker, an oversized input) is rebuilt by
`with_text`: the replacement text where its text was, its small parts as they were, and every
large part (a long bash command, a large thinking block or tool-call arguments, a large extra
field, an unknown block) left out — each is archived with the message (`left_out`).

An interaction group is a user message and the assistant/tool traffic after it; messages before
the first user message form a group of their own (a compaction summary, say).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import blake3
import orjson

from cwa import limits
from cwa.errors import InvalidRequest
from cwa.store.serialization import derive_message_key, message_header
from cwa.timestamps import parse_timestamp

IMAGE_TOKENS = 1_200  # what a host's estimator charges an image; its base64 is not text
PER_MESSAGE_TOKENS = 4  # role and framing of one provider message
TOOL_ROLES = ("toolResult", "bashExecution")  # output that can be externalized
UNCOUNTED_SLACK = 2_048  # bytes of a message's other fields counted as framing, not as content
PART_SLACK = 2_048  # a part of a replaced message this small stays as it was (JSON bytes)
COMMAND_HEAD_CHARS = 200  # what a replaced bash message keeps of a long command
# The fields the serialization reads, per role (everything else is counted by its JSON bytes).
READ_FIELDS = {
    "user": {"role", "content", "timestamp"},
    "custom": {"role", "content", "timestamp"},
    "assistant": {"role", "content", "timestamp"},
    "toolResult": {"role", "content", "timestamp", "toolName", "toolCallId", "isError"},
    "bashExecution": {"role", "command", "output", "exitCode", "timestamp"},
    "compactionSummary": {"role", "summary", "timestamp"},
    "branchSummary": {"role", "summary", "timestamp"},
}
BLOCK_FIELDS = {
    "text": {"type", "text"},
    "thinking": {"type", "thinking"},
    "image": {"type", "data", "mimeType"},
    "toolCall": {"type", "id", "name", "arguments"},
}


@dataclass(frozen=True)
class Entry:
    """One transcript message with what the engine derives from it."""

    index: int
    key: str
    role: str
    text: str  # deterministic serialization (archived text)
    timestamp: str | None
    tool_call_id: str | None
    tool_name: str | None
    tokens: int  # sizing estimate of the message as the host would send it
    raw: dict[str, Any]  # the host's message, never modified

    @property
    def is_user(self) -> bool:
        return self.role == "user"

    def admission(self, text: str | None = None) -> dict[str, Any]:
        """The message as an admission request names it."""
        message: dict[str, Any] = {"key": self.key, "role": self.role, "text": self.text if text is None else text}
        for name, value in (
            ("toolName", self.tool_name),
            ("toolCallId", self.tool_call_id),
            ("timestamp", self.timestamp),
        ):
            if value is not None:
                message[name] = value
        return message


def sizing_tokens(text: str) -> int:
    return -(-len(text) // 4)


def hint_tokens(text: str) -> int:
    """The sizing of a hint the copy adds after a user message: its text and its framing."""
    return sizing_tokens(text) + PER_MESSAGE_TOKENS


def _bad(path: str, what: str) -> InvalidRequest:
    return InvalidRequest(f"{path} {what}", field=path, reason="bad-message")


def _string(
    message: dict[str, Any], name: str, path: str, required: bool = False, max_chars: int | None = None
) -> str | None:
    value = message.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise _bad(f"{path}.{name}", "must be a string")
    if max_chars is not None and len(value) > max_chars:  # it is archived under this name
        raise _bad(f"{path}.{name}", f"is longer than {max_chars} characters")
    return value


def _blocks(content: Any, path: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if content is None:
        return []
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise _bad(f"{path}.content", "must be a string or a list of content blocks")
    return content


def _block_text(block: dict[str, Any], path: str) -> tuple[str, int]:
    """(text, extra sizing tokens) of one content block."""
    kind = block.get("type")
    if kind == "text":
        return _string(block, "text", path, required=True) or "", 0
    if kind == "thinking":
        return "[thinking]\n" + (_string(block, "thinking", path) or ""), 0
    if kind == "toolCall":
        arguments = orjson.dumps(block.get("arguments"), option=orjson.OPT_SORT_KEYS).decode()
        return f"[toolCall {block.get('name')} id={block.get('id')}] {arguments}", 0
    if kind == "image":
        data = block.get("data") if isinstance(block.get("data"), str) else ""
        digest = blake3.blake3(data.encode("ascii", "replace")).hexdigest()[:16]
        return f"[image {block.get('mimeType')} {len(data)} base64 chars blake3 {digest}]", IMAGE_TOKENS
    return f"[{kind} block]", 0


def content_text(content: Any, path: str) -> tuple[str, int]:
    """The text blocks of a content value joined by blank lines, and the images' sizing tokens."""
    texts, extra = [], 0
    for index, block in enumerate(_blocks(content, path)):
        text, cost = _block_text(block, f"{path}.content[{index}]")
        texts.append(text)
        extra += cost
    return "\n\n".join(texts), extra


def _timestamp(message: dict[str, Any], path: str) -> str | None:
    value = message.get("timestamp")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _bad(f"{path}.timestamp", "must be epoch milliseconds or ISO-8601 text")
    try:
        return parse_timestamp(value)
    except ValueError as exc:
        raise _bad(f"{path}.timestamp", f"is not a valid timestamp: {exc}") from exc


def serialize(message: Any, path: str) -> tuple[str, str, int, str | None, str | None]:
    """(role, text, extra sizing tokens, tool name, tool call id) of one Pi message."""
    if not isinstance(message, dict):
        raise _bad(path, "must be an object")
    role = message.get("role")
    tool_name = tool_call_id = None
    if role in ("user", "assistant"):
        text, extra = content_text(message.get("content"), path)
    elif role == "toolResult":
        text, extra = content_text(message.get("content"), path)
        tool_name = _string(message, "toolName", path, max_chars=limits.MAX_TOOL_NAME_CHARS)
        tool_call_id = _string(message, "toolCallId", path, max_chars=limits.MAX_TOOL_CALL_ID_CHARS)
        if message.get("isError") is True:
            text = "[error]\n" + text
    elif role == "bashExecution":
        command = _string(message, "command", path, required=True)
        output = _string(message, "output", path) or ""
        text, extra = f"$ {command}\n{output}", 0
        if message.get("exitCode") not in (None, 0):
            text += f"\n[exit code {message.get('exitCode')}]"
        tool_name = "bash"
    elif role in ("compactionSummary", "branchSummary"):
        text, extra = _string(message, "summary", path) or "", 0
    elif role == "custom":
        text, extra = content_text(message.get("content"), path)
        custom_type = message.get("customType")
        fits = isinstance(custom_type, str) and 0 < len(custom_type) <= limits.MAX_TOOL_NAME_CHARS
        tool_name = custom_type if fits else None  # a type too long to be a name is not archived as one
    else:
        raise InvalidRequest(
            f"{path}.role {role!r} is not a Pi message role", field=f"{path}.role", reason="bad-message"
        )
    return role, text, extra, tool_name, tool_call_id


def _json_bytes(value: Any) -> int:
    return len(orjson.dumps(value)) if isinstance(value, (dict, list, str)) else 8


def uncounted_bytes(message: dict[str, Any]) -> int:
    """JSON bytes of what reaches the provider besides the serialization's text and the images:
    fields the serialization does not read, unknown blocks, blocks' own extra fields."""
    read = READ_FIELDS.get(message.get("role"), {"role"})
    total = sum(_json_bytes(value) for name, value in message.items() if name not in read)
    content = message.get("content")
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        known = BLOCK_FIELDS.get(block.get("type"))
        total += (
            _json_bytes(block)
            if known is None
            else sum(_json_bytes(value) for name, value in block.items() if name not in known)
        )
    return total


def beyond_slack_tokens(message: dict[str, Any]) -> int:
    """Tokens (4 bytes each) of what reaches the provider outside the text beyond UNCOUNTED_SLACK."""
    beyond = max(0, uncounted_bytes(message) - UNCOUNTED_SLACK)
    return -(-beyond // 4)


def sizing_of(message: dict[str, Any], text: str, extra: int) -> int:
    """A message's sizing: its text, its images (`extra`), its framing, and whatever else of it
    reaches the provider beyond UNCOUNTED_SLACK bytes."""
    return sizing_tokens(text) + extra + PER_MESSAGE_TOKENS + beyond_slack_tokens(message)


def shown_tokens(message: dict[str, Any]) -> int:
    """The sizing of a message as the provider copy shows it (a replacement included)."""
    _, text, extra, _, _ = serialize(message, "message")
    return sizing_of(message, text, extra)


def entry_of(message: Any, index: int, path: str = "messages") -> Entry:
    where = f"{path}[{index}]"
    role, text, extra, tool_name, tool_call_id = serialize(message, where)
    timestamp = _timestamp(message, where)
    shape = {"role": role, "text": text, "toolName": tool_name, "toolCallId": tool_call_id, "timestamp": timestamp}
    key = derive_message_key(shape, (message_header(shape) + text).encode("utf-8"))
    try:
        tokens = sizing_of(message, text, extra)
    except orjson.JSONEncodeError as exc:  # a Python caller's object that is no JSON (hosts parse JSON)
        raise _bad(where, f"holds a value that is not JSON: {exc}") from exc
    return Entry(index, key, role, text, timestamp, tool_call_id, tool_name, tokens, message)


def entries_of(messages: list[Any], start: int = 0) -> list[Entry]:
    """Entries of consecutive messages; a key repeated (the same message twice) gets a suffix."""
    return [entry_of(m, start + i) for i, m in enumerate(messages)]


def unique_keys(entries: list[Entry], taken: dict[str, int]) -> list[Entry]:
    """Entries with keys unique across the transcript: the n-th repeat of a key gets `-n`.
    `taken` counts the keys seen so far and is updated."""
    result = []
    for entry in entries:
        seen = taken.get(entry.key, 0)
        taken[entry.key] = seen + 1
        if seen:
            entry = replace(entry, key=f"{entry.key}-{seen + 1}")
        result.append(entry)
    return result


def _small(value: Any) -> bool:
    return _json_bytes(value) <= PART_SLACK


def _kept_fields(raw: dict[str, Any], role: str) -> dict[str, Any]:
    """The fields a replaced message keeps besides its text: what the serialization reads, and
    any other field that is small."""
    read = READ_FIELDS.get(role, {"role"})
    return {name: value for name, value in raw.items() if name in read or _small(value)}


def _kept_block(block: Any) -> Any | None:
    """A content block a replaced message keeps (text and thinking give way to the replacement):
    an image; a tool call, with large arguments left out (its id and name pair it with its
    result); never an unknown block that is large."""
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind in ("text", "thinking"):
        return None if kind == "text" or not _small(block) else block
    if kind == "toolCall":
        arguments = block.get("arguments")
        if _small(arguments):
            return block
        return {
            **block,
            "arguments": {
                "cwaLeftOut": f"{_json_bytes(arguments):,} bytes of arguments, archived "
                "with this message (see its text)"
            },
        }
    if kind == "image" or _small(block):
        return block
    return None


def with_text(entry: Entry, text: str) -> dict[str, Any]:
    """The host's message as a replacement shows it: `text` where its text was; its images, tool
    calls and other small parts kept; its large parts left out (they are archived with it). A
    message's own object is never modified."""
    raw = _kept_fields(entry.raw, entry.role)
    if entry.role == "bashExecution":
        command = raw.get("command")
        if isinstance(command, str) and len(command) > COMMAND_HEAD_CHARS and not _small(command):
            raw["command"] = command[:COMMAND_HEAD_CHARS] + " … (the whole command is archived)"
        return {**raw, "output": text}
    if entry.role in ("compactionSummary", "branchSummary"):
        return {**raw, "summary": text}
    content = entry.raw.get("content")
    if not isinstance(content, list):
        return {**raw, "content": text if entry.role in ("user", "custom") else [{"type": "text", "text": text}]}
    # the replacement where the first text was; else after the thinking a message opens with
    blocks, placed = [], False
    for block in content:
        if not placed and isinstance(block, dict) and block.get("type") == "text":
            blocks.append({"type": "text", "text": text})
            placed = True
        kept = _kept_block(block)
        if kept is not None:
            blocks.append(kept)
    if not placed:
        leading = next((i for i, b in enumerate(blocks) if b.get("type") != "thinking"), len(blocks))
        blocks.insert(leading, {"type": "text", "text": text})
    return {**raw, "content": blocks}


def left_out(entry: Entry) -> str:
    """What `with_text` leaves out that the serialization does not hold (large extra fields,
    large unknown blocks), as a JSON appendix for the message's archive; "" when nothing."""
    read = READ_FIELDS.get(entry.role, {"role"})
    fields = {name: value for name, value in entry.raw.items() if name not in read and not _small(value)}
    content = entry.raw.get("content")
    blocks = (
        [
            block
            for block in content
            if isinstance(block, dict) and block.get("type") not in BLOCK_FIELDS and not _small(block)
        ]
        if isinstance(content, list)
        else []
    )
    if not fields and not blocks:
        return ""
    parts = {**({"fields": fields} if fields else {}), **({"blocks": blocks} if blocks else {})}
    return (
        "\n\n[parts of this message besides its text, as JSON]\n"
        + orjson.dumps(parts, option=orjson.OPT_SORT_KEYS).decode()
    )


def shown_text(entry: Entry, text: str) -> str:
    """The serialization of the message as the provider saw it, `text` in place of its own (what
    an archived turn stores for an externalized message: the preview names the source)."""
    return serialize(with_text(entry, text), "message")[1]


def chain_digest(previous: str, key: str) -> str:
    """The running digest over message keys (`baseDigest`): blake3 of the previous digest and key."""
    return blake3.blake3(f"{previous}\x1f{key}".encode()).hexdigest()[:32]


EMPTY_DIGEST = blake3.blake3(b"cwa-transcript").hexdigest()[:32]


def groups(entries: list[Entry]) -> list[list[Entry]]:
    """Interaction groups in order: each starts at a user message (the first may not)."""
    found: list[list[Entry]] = []
    for entry in entries:
        if entry.is_user or not found:
            found.append([entry])
        else:
            found[-1].append(entry)
    return found


SUMMARY_ROLES = ("compactionSummary", "branchSummary")


def history_groups(entries: list[Entry]) -> list[list[Entry]]:
    """Interaction groups of a whole history (an import): as `groups`, and a summary the client
    wrote mid-way (a compaction) starts a group of its own instead of growing the turn before it."""
    found: list[list[Entry]] = []
    for entry in entries:
        if entry.is_user or entry.role in SUMMARY_ROLES or not found:
            found.append([entry])
        else:
            found[-1].append(entry)
    return found


def tool_calls(entries: list[Entry]) -> dict[str, tuple[str, str]]:
    """tool call id → (tool name, normalized arguments) from the assistants' toolCall blocks."""
    calls: dict[str, tuple[str, str]] = {}
    for entry in entries:
        if entry.role != "assistant" or not isinstance(entry.raw.get("content"), list):
            continue
        for block in entry.raw["content"]:
            if isinstance(block, dict) and block.get("type") == "toolCall" and isinstance(block.get("id"), str):
                arguments = orjson.dumps(block.get("arguments"), option=orjson.OPT_SORT_KEYS).decode()
                calls[block["id"]] = (str(block.get("name")), arguments)
    return calls


def group_complete(group: list[Entry], followed: bool, settled: bool) -> bool:
    """A group is complete when a later user message follows it, or when the agent settled (not
    aborted) after an assistant message that ended the turn."""
    if followed:
        return True
    last = group[-1]
    return settled and last.role == "assistant" and last.raw.get("stopReason") not in ("toolUse", "error", "aborted")
