"""Timestamps in one canonical form: UTC ISO-8601 with milliseconds, e.g. 2026-11-29T23:10:00.000Z.

That form sorts as text, so SQL users can `order by created_at` directly. The archive stores a
document's times as integer epoch milliseconds (migration 0030); its statements convert at the
boundary and its views show this form, so Python only ever sees it.
Input may be an ISO-8601 string (a missing offset is read as UTC) or integer epoch milliseconds
(Pi's message timestamps).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

# The expiry schedule adds up to 36,500 days (100 years) to a creation time, in SQLite date
# arithmetic, which stops at 9999-12-31: later creation times are refused.
LATEST = "9899-12-31T23:59:59.999Z"
MAX_EPOCH_MS = 250_246_627_199_999  # LATEST in epoch milliseconds


class OutOfRange(ValueError):
    """A well-formed timestamp outside what the archive can schedule."""


def _canonical(year: int, month: int, day: int, hour: int, minute: int, second: int, millis: int) -> str:
    """Fixed width at every year (strftime's %Y drops leading zeros before 1000)."""
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{millis:03d}Z"


def format_timestamp(moment: datetime) -> str:
    m = moment.astimezone(UTC)
    return _canonical(m.year, m.month, m.day, m.hour, m.minute, m.second, m.microsecond // 1000)


def utc_now() -> str:
    return format_timestamp(datetime.now(UTC))


def parse_timestamp(value: str | int) -> str:
    """Return the canonical form of `value`; raise ValueError when it is not a timestamp."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a timestamp")
    if isinstance(value, int):
        if not 0 <= value <= MAX_EPOCH_MS:
            raise OutOfRange(f"epoch milliseconds must be between 0 and {MAX_EPOCH_MS} ({LATEST})")
        seconds, millis = divmod(value, 1000)  # integers: a float would round the last millisecond
        t = time.gmtime(seconds)  # no datetime: a transcript's timestamps are parsed by the hundred thousand
        return _canonical(t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, millis)
    if not isinstance(value, str):
        raise ValueError("not a string or integer")
    text = value.strip()
    # fromisoformat accepts a bare date and week dates too; require at least a full date.
    if len(text) < 10 or text[4] != "-":
        raise ValueError("not an ISO-8601 date-time")
    moment = datetime.fromisoformat(text.replace("z", "Z"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        canonical = format_timestamp(moment)
    except (OverflowError, ValueError) as exc:  # e.g. year 1 with a positive offset
        raise OutOfRange(f"a timestamp must be between 0001-01-01 and {LATEST[:10]}") from exc
    if canonical > LATEST:
        raise OutOfRange(
            f"a timestamp must be between 0001-01-01 and {LATEST[:10]} (the expiry schedule adds up to 100 years)"
        )
    return canonical


def to_datetime(canonical: str) -> datetime:
    return datetime.fromisoformat(canonical.replace("Z", "+00:00"))


def shift(canonical: str, seconds: float) -> str:
    """A canonical timestamp moved by `seconds`."""
    return format_timestamp(to_datetime(canonical) + timedelta(seconds=seconds))


def age_days(canonical: str, now: str) -> float:
    return (to_datetime(now) - to_datetime(canonical)).total_seconds() / 86400


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_ms(canonical: str) -> int:
    """A canonical timestamp as integer epoch milliseconds, as the archive stores a document's."""
    return (to_datetime(canonical) - _EPOCH) // timedelta(milliseconds=1)


def age_days_ms(created_ms: int, now_ms: int) -> float:
    """`age_days` of two epoch-millisecond times: the same float (both are the exact quotient,
    rounded once)."""
    return (now_ms - created_ms) / 1000 / 86400
