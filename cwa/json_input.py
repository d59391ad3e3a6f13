"""Decoding the JSON a caller sends (a request, a request line, a file of them): bounded in size
and nesting, every failure a typed error. Every host parses through here, so nothing nested
deeper than MAX_JSON_DEPTH reaches code that walks it or writes it back."""

from __future__ import annotations

from typing import Any

import orjson

from cwa import limits
from cwa.errors import InvalidRequest, LimitExceeded


def parse_json_body(body: bytes | str, what: str = "request", *, bounded: bool = True) -> Any:
    """Decode one JSON document, mapping every decoding failure to a typed error: too large,
    not JSON, or nested deeper than MAX_JSON_DEPTH (every host parses through here, so nothing
    deeper ever reaches code that walks or writes it back). `bounded=False` leaves the depth to
    the caller: `check_depth`, or the contract every method's params pass (`contract.validate`)."""
    if len(body) > limits.MAX_REQUEST_BYTES:
        raise LimitExceeded(
            f"the {what} is {len(body)} bytes; the limit is {limits.MAX_REQUEST_BYTES}",
            reason="too-large",
            limit=limits.MAX_REQUEST_BYTES,
            size=len(body),
        )
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"the {what} is not valid JSON: {exc}", reason="bad-json") from exc
    if bounded:
        check_depth(value, f"the {what}")
    return value


def check_depth(value: Any, what: str, field: str | None = None) -> None:
    """`invalid-request` (`too-deep`) when `value` nests deeper than MAX_JSON_DEPTH."""
    if not within_depth(value):
        where = {"field": field} if field else {}
        raise InvalidRequest(
            f"{what} nests arrays and objects deeper than {limits.MAX_JSON_DEPTH} levels",
            **where,
            reason="too-deep",
            limit=limits.MAX_JSON_DEPTH,
        )


# orjson refuses to write more than ORJSON_MAX_DEPTH levels, so a value wrapped in
# ORJSON_MAX_DEPTH - MAX_JSON_DEPTH more lists writes exactly when it nests at most MAX_JSON_DEPTH
# levels: the check runs at C speed, where a Python walk would visit every array and object.
# tests/test_bad_input.py pins both bounds, so an orjson that changed its own would be noticed.
ORJSON_MAX_DEPTH = 254


def within_depth(value: Any, depth: int = limits.MAX_JSON_DEPTH) -> bool:
    """Whether `value` nests arrays and objects at most `depth` levels."""
    if not isinstance(value, (dict, list)):
        return True
    for _ in range(ORJSON_MAX_DEPTH - depth):
        value = [value]
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return False
    return True
