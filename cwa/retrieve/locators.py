"""Signed locators: opaque, tamper-evident pointers from a search result back to exact bytes.

    cwa1.<base64url(payload JSON)>.<base64url(HMAC-SHA256(secret, "cwa1." + payload))>

The payload binds document id, version, the unit to materialize, window ordinal, match range, message ordinal (for a
structural hit), index generation, lease id, project, session and scope. The secret is the
archive's 32-byte secret (cwa/store/secret.py), so a locator is only valid for the archive that issued it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import astuple, dataclass, fields

import orjson

PREFIX = "cwa1"


@dataclass(frozen=True)
class Locator:
    documentId: str
    version: int
    unit: str  # window | message | anchor | range: what recall materializes around
    window: int | None
    start: int
    end: int
    message: int | None
    generation: int | None
    lease: str | None
    project: str
    session: str
    scope: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign(locator: Locator, secret: bytes) -> str:
    payload = _b64(orjson.dumps(astuple(locator)))  # positional: keeps locators short
    body = f"{PREFIX}.{payload}"
    return f"{body}.{_b64(hmac.new(secret, body.encode(), hashlib.sha256).digest())}"


def verify(token: str, secret: bytes) -> Locator | None:
    """The locator, or None when the token is malformed or its signature does not match."""
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3 or parts[0] != PREFIX:
        return None
    body = f"{parts[0]}.{parts[1]}"
    try:
        signature = _unb64(parts[2])
        expected = hmac.new(secret, body.encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(signature, expected):
            return None
        values = orjson.loads(_unb64(parts[1]))
        if not isinstance(values, list) or len(values) != len(fields(Locator)):
            return None
        return Locator(*values)
    except (ValueError, TypeError, orjson.JSONDecodeError):
        return None
