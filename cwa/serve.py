"""`cwa serve`: JSON lines on stdin/stdout for a host process that keeps one child open.

Each line `{"id", "method", "params"}` gets one line back, `{"id", "result"}` or
`{"id", "error": {"code", "message", "details"}}`, in order. A malformed line gets an error
reply (with `"id": null` when no id could be read) and the server keeps serving; end of input
ends it with exit code 0.
"""

from __future__ import annotations

import sys
import traceback
from typing import Any, BinaryIO, Callable, Iterator

import orjson

from cwa import limits
from cwa.contract import parse_json_body
from cwa.errors import CwaError, Internal, InvalidRequest, LimitExceeded

ENVELOPE_FIELDS = {"id", "method", "params"}


def read_lines(stream: BinaryIO, max_bytes: int = limits.MAX_REQUEST_BYTES) -> Iterator[bytes | None]:
    """Lines of `stream`, without the newline; None stands for a line longer than `max_bytes`."""
    while True:
        line = stream.readline(max_bytes + 1)
        if not line:
            return
        if len(line) > max_bytes and not line.endswith(b"\n"):
            while True:  # drop the rest of the oversized line
                rest = stream.readline(1 << 20)
                if not rest or rest.endswith(b"\n"):
                    break
            yield None
            continue
        yield line.rstrip(b"\r\n")


def handle_line(call: Callable[[str, Any], dict[str, Any]], line: bytes | None) -> dict[str, Any]:
    request_id: Any = None
    try:
        if line is None:
            raise LimitExceeded(
                f"a request line is limited to {limits.MAX_REQUEST_BYTES} bytes",
                reason="too-large",
                limit=limits.MAX_REQUEST_BYTES,
            )
        envelope = parse_json_body(line, "request line")
        if not isinstance(envelope, dict):
            raise InvalidRequest(
                'a request line must be a JSON object {"id", "method", "params"}',
                reason="not-an-object",
            )
        candidate_id = envelope.get("id")
        if candidate_id is not None and (
            isinstance(candidate_id, bool) or not isinstance(candidate_id, (str, int))
        ):
            raise InvalidRequest("id must be a string or an integer", field="id", reason="wrong-type")
        request_id = candidate_id
        unknown = sorted(set(envelope) - ENVELOPE_FIELDS)
        if unknown:
            raise InvalidRequest(
                f"unknown request field {unknown[0]}", field=unknown[0], reason="unknown-field"
            )
        method = envelope.get("method")
        if not isinstance(method, str):
            raise InvalidRequest("method must be a string", field="method", reason="wrong-type")
        params = envelope.get("params")
        return {"id": request_id, "result": call(method, {} if params is None else params)}
    except CwaError as error:
        return {"id": request_id, "error": error.to_json()}
    except Exception as exc:  # a bug must not end the session of the host
        traceback.print_exc(file=sys.stderr)
        return {"id": request_id, "error": Internal(f"{type(exc).__name__}: {exc}").to_json()}


def serve(call: Callable[[str, Any], dict[str, Any]], stdin: BinaryIO, stdout: BinaryIO) -> int:
    for line in read_lines(stdin):
        if line is not None and not line.strip():
            continue
        reply = handle_line(call, line)
        stdout.write(orjson.dumps(reply) + b"\n")
        stdout.flush()
    return 0
