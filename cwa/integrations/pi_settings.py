"""`cwa pi install | uninstall | path`: the extension's entry in Pi's settings `extensions` list.

Pi reads `~/.pi/agent/settings.json` (or `$PI_CODING_AGENT_DIR/settings.json`) and a project's
`.pi/settings.json`. Both edits are idempotent, keep every other setting as it was, and replace the
file atomically, so a failure leaves the old file whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from cwa.config import pi_settings_path
from cwa.errors import InvalidRequest, StorageUnavailable
from cwa.file_writes import write_atomically

EXTENSION_SUFFIX = ("integrations", "pi", "extension.ts")


def extension_path() -> Path:
    """The absolute path of the extension shipped inside this installation of cwa."""
    return Path(str(resources.files("cwa.integrations").joinpath("pi", "extension.ts"))).resolve()


def settings_file(project: Path | None, env: Mapping[str, str]) -> Path:
    return project / ".pi" / "settings.json" if project is not None else pi_settings_path(env)


def _is_cwa_extension(entry: Any) -> bool:
    """An entry naming a cwa extension file: this installation's or another's (an older venv)."""
    return isinstance(entry, str) and Path(entry).parts[-4:] == ("cwa", *EXTENSION_SUFFIX)


def _read(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise StorageUnavailable(f"cannot read {path}: {exc.strerror}", path=str(path)) from exc
    try:
        data = orjson.loads(raw) if raw.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(
            f"{path} is not valid JSON ({exc}); fix or remove it first",
            field="settings",
            reason="bad-json",
            path=str(path),
        ) from exc
    if not isinstance(data, dict):
        raise InvalidRequest(f"{path} is not a JSON object", field="settings", reason="not-an-object", path=str(path))
    if not isinstance(data.get("extensions", []), list):
        raise InvalidRequest(
            f'"extensions" in {path} is not a list', field="extensions", reason="wrong-type", path=str(path)
        )
    return data


def install(project: Path | None, env: Mapping[str, str]) -> dict[str, Any]:
    """Name this installation's extension in the settings' `extensions` list (replacing the entry
    of another cwa installation, if any)."""
    path, wanted = settings_file(project, env), str(extension_path())
    data = _read(path)
    entries = data.get("extensions", [])
    kept = [e for e in entries if not _is_cwa_extension(e) or e == wanted]
    changed = wanted not in kept or kept != entries
    if wanted not in kept:
        kept.append(wanted)
    if changed:
        write_atomically(path, orjson.dumps({**data, "extensions": kept}, option=orjson.OPT_INDENT_2) + b"\n")
    return {"settings": str(path), "extension": wanted, "changed": changed, "installed": True}


def uninstall(project: Path | None, env: Mapping[str, str]) -> dict[str, Any]:
    """Remove every cwa extension entry from the settings' `extensions` list."""
    path = settings_file(project, env)
    data = _read(path)
    entries = data.get("extensions", [])
    kept = [e for e in entries if not _is_cwa_extension(e)]
    changed = kept != entries
    if changed:
        write_atomically(path, orjson.dumps({**data, "extensions": kept}, option=orjson.OPT_INDENT_2) + b"\n")
    return {"settings": str(path), "extension": str(extension_path()), "changed": changed, "installed": False}
