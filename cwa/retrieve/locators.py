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
from dataclasses import dataclass, fields

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


def sign_values(prefix: str, values: list, secret: bytes) -> str:
    """`prefix.<payload>.<mac>`: a JSON array, signed with the archive's secret."""
    payload = _b64(orjson.dumps(values))
    body = f"{prefix}.{payload}"
    return f"{body}.{_b64(hmac.new(secret, body.encode(), hashlib.sha256).digest())}"


def verify_values(prefix: str, token: str, secret: bytes, count: int) -> list | None:
    """The signed array of `count` values, or None when the token is malformed or forged."""
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3 or parts[0] != prefix:
        return None
    body = f"{parts[0]}.{parts[1]}"
    try:
        signature = _unb64(parts[2])
        expected = hmac.new(secret, body.encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(signature, expected) or _b64(signature) != parts[2]:
            return None  # only the canonical encoding: no padding, no stray low bits
        payload = _unb64(parts[1])
        if _b64(payload) != parts[1]:
            return None
        values = orjson.loads(payload)
    except (ValueError, TypeError, orjson.JSONDecodeError):
        return None
    return values if isinstance(values, list) and len(values) == count else None


_FIELDS = tuple(f.name for f in fields(Locator))


def sign(locator: Locator, secret: bytes) -> str:
    return sign_values(PREFIX, [getattr(locator, name) for name in _FIELDS], secret)  # positional: short


def verify(token: str, secret: bytes) -> Locator | None:
    """The locator, or None when the token is malformed or its signature does not match."""
    values = verify_values(PREFIX, token, secret, len(_FIELDS))
    try:
        return Locator(*values) if values is not None else None
    except TypeError:
        return None
