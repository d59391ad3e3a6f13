"""Reading a client's configuration file before cwa merges its entry (written back atomically by
cwa/file_writes.py): a missing file is empty; one that is not what it should be is refused with a
typed error and left alone."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from cwa.errors import InvalidRequest, StorageUnavailable


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageUnavailable(f"cannot read {path}: {exc}", path=str(path)) from exc


def json_object(path: Path, text: str, section: str) -> dict[str, Any]:
    """The file's JSON object, whose `section` (when present) is an object too."""
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            f"{path} is not valid JSON ({exc}); fix or remove it first",
            field="config",
            reason="bad-json",
            path=str(path),
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get(section, {}), dict):
        raise InvalidRequest(
            f"{path} does not hold an object {section!r}", field=section, reason="wrong-type", path=str(path)
        )
    return data


def toml_document(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidRequest(
            f"{path} is not valid TOML ({exc}); fix or remove it first",
            field="config",
            reason="bad-toml",
            path=str(path),
        ) from exc
