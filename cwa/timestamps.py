"""Timestamps in one canonical form: UTC ISO-8601 with milliseconds, e.g. 2026-11-29T23:10:00.000Z.

That form sorts as text, so SQL users can `order by created_at` directly.
Input may be an ISO-8601 string (a missing offset is read as UTC) or integer epoch milliseconds
(Pi's message timestamps).
"""

from __future__ import annotations

from datetime import datetime, timezone

MAX_EPOCH_MS = 253402300799999  # 9999-12-31T23:59:59.999Z


def format_timestamp(moment: datetime) -> str:
    moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def utc_now() -> str:
    return format_timestamp(datetime.now(timezone.utc))


def parse_timestamp(value: str | int) -> str:
    """Return the canonical form of `value`; raise ValueError when it is not a timestamp."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a timestamp")
    if isinstance(value, int):
        if not 0 <= value <= MAX_EPOCH_MS:
            raise ValueError("epoch milliseconds out of range")
        return format_timestamp(datetime.fromtimestamp(value / 1000, timezone.utc))
    if not isinstance(value, str):
        raise ValueError("not a string or integer")
    text = value.strip()
    # fromisoformat accepts a bare date and week dates too; require at least a full date.
    if len(text) < 10 or text[4] != "-":
        raise ValueError("not an ISO-8601 date-time")
    moment = datetime.fromisoformat(text.replace("z", "Z"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return format_timestamp(moment)
    except (OverflowError, ValueError) as exc:  # e.g. year 1 with a positive offset
        raise ValueError("timestamp out of range") from exc


def to_datetime(canonical: str) -> datetime:
    return datetime.fromisoformat(canonical.replace("Z", "+00:00"))


def shift(canonical: str, seconds: float) -> str:
    """A canonical timestamp moved by `seconds`."""
    from datetime import timedelta

    return format_timestamp(to_datetime(canonical) + timedelta(seconds=seconds))


def age_days(canonical: str, now: str) -> float:
    return (to_datetime(now) - to_datetime(canonical)).total_seconds() / 86400
