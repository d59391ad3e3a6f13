"""Finding and reading the SQL that lives in `migrations/` and `sql/`.

In a source checkout (and an editable install) those folders sit beside the `cwa` package; a
built wheel carries them inside it as `cwa/migrations` and `cwa/sql`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
_NAME_LINE = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def resource_dir(name: str) -> Path:
    for candidate in (_PACKAGE_DIR / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir() and any(candidate.glob("*.sql")):
            return candidate
    raise FileNotFoundError(f"cannot find the cwa {name}/ folder next to {_PACKAGE_DIR}")


@cache
def queries(stem: str) -> Mapping[str, str]:
    """The named queries of `sql/<stem>.sql`: each begins with a `-- name: NAME` line."""
    text = (resource_dir("sql") / f"{stem}.sql").read_text(encoding="utf-8")
    parts = _NAME_LINE.split(text)
    named = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        if name in named:
            raise ValueError(f"sql/{stem}.sql names {name!r} twice")
        named[name] = body.strip()
    return MappingProxyType(named)
