"""Redacted release evidence: `cwa evidence` records a verification run in aggregates only, and
`cwa evidence verify` rejects any record that holds more.

A record holds versions, hashes (of the installed cwa source), counts, durations, byte totals,
exit statuses and gate results — nothing a user wrote or an archive holds. `verify` walks every
key and string of a record and rejects: free text (a prompt or recalled text), environment
values, credential-like strings, home directories and user names, absolute paths, session ids,
and raw database keys (message keys, document ids, locators, cursors, lease ids, confirm tokens,
archive ids). Hex digests are allowed only under keys that name a hash.
"""

from __future__ import annotations

import getpass
import importlib.metadata
import os
import platform
import re
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import blake3

from cwa import __version__
from cwa.errors import CwaError

RECORD_KIND = "cwa-evidence"
RECORD_VERSION = 1
MAX_TEXT = 120  # longer strings are free text, not aggregates
MIN_ENV_VALUE = 10  # shorter environment values are too common to tell apart from ordinary words
HASH_KEY = re.compile(r"(?i)(blake3|hash|digest|fingerprint)$")
HEX_DIGEST = re.compile(r"^(r1-)?[0-9a-f]{16,64}$")

_CREDENTIALS = (
    re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),  # a JWT
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{12,}"),
    re.compile(r"(?i)\b(password|passwd|secret|token|api[_-]?key|credential)s?\s*[:=]\s*\S+"),
    re.compile(r"[A-Za-z0-9+/_-]{32,}={0,2}"),  # a long random-looking token
)
_RAW_KEYS = (
    (re.compile(r"\bk-[0-9a-f]{32}\b"), "a message key"),
    (re.compile(r"\bdoc-[0-9a-f]{20}\b"), "a document id"),
    (re.compile(r"\bcwa1t?[A-Za-z0-9_-]{16,}"), "a locator or cursor"),
    (re.compile(r"\blease-[0-9a-f]{8,}\b"), "a lease id"),
    (re.compile(r"\bredact-[0-9a-f]{8,}\b"), "a confirm token"),
    (re.compile(r"\bcheckpoint:[0-9a-f]{8,}"), "a checkpoint key"),
    (re.compile(r"\b[0-9a-f]{24,}\b"), "a raw hex key"),
)
_SESSION_ID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_ABSOLUTE_PATH = re.compile(r"(^|[\s\"'=(:,])(/[^\s/\"']+)+/?|(^|[\s\"'=(])[A-Za-z]:\\")
_HOME = re.compile(r"(?i)(/home/|/users/|/root\b|~[a-z_][a-z0-9_-]*)")
_SESSION_KEYS = re.compile(r"(?i)^(session(id|s|key)?|parentsessionid|lineage)$")
_KEY_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
_COMMON_VALUES = {"C.UTF-8", "en_US.UTF-8", "xterm-256color"}


def _strings(value: Any, path: str = "$", key: str | None = None) -> Iterator[tuple[str, bool, str | None, str]]:
    """(path, is_field_name, field, text) for every field name and string value in `value`."""
    if isinstance(value, dict):
        for name, item in value.items():
            yield f"{path}.{name}", True, None, str(name)
            yield from _strings(item, f"{path}.{name}", str(name))
    elif isinstance(value, list):
        for number, item in enumerate(value):
            yield from _strings(item, f"{path}[{number}]", key)
    elif isinstance(value, str):
        yield path, False, key, value


def _environment_values(env: Mapping[str, str]) -> set[str]:
    return {v for v in env.values() if len(v) >= MIN_ENV_VALUE and v not in _COMMON_VALUES and not v.isdigit()}


def findings(record: Any, env: Mapping[str, str] | None = None, user: str | None = None) -> list[dict[str, str]]:
    """Why `record` is not aggregate-only evidence: one finding per offending key or string."""
    env = os.environ if env is None else env
    user = user if user is not None else getpass.getuser()
    environment = _environment_values(env)
    found: list[dict[str, str]] = []

    def reject(path: str, reason: str) -> None:
        found.append({"path": path, "reason": reason})

    if not isinstance(record, dict) or record.get("kind") != RECORD_KIND:
        reject("$", f"not a {RECORD_KIND} record")
    for path, is_key, key, text in _strings(record):
        if is_key:
            if not _KEY_NAME.match(text):
                reject(path, "a field name that is free text")
            continue
        if key is not None and _SESSION_KEYS.match(key):
            reject(path, "a session id")
            continue
        hashed = key is not None and HASH_KEY.search(key) and HEX_DIGEST.match(text)
        if len(text) > MAX_TEXT or "\n" in text:
            reject(path, "free text (a prompt or recalled text?)")
            continue
        if any(value in text for value in environment):
            reject(path, "an environment value")
        if _SESSION_ID.search(text):
            reject(path, "a session id")
        if _HOME.search(text) or (len(user) >= 2 and re.search(rf"(^|[/\\@~]){re.escape(user)}($|[/\\@])", text)):
            reject(path, "a home directory or user name")
        if _ABSOLUTE_PATH.search(text):
            reject(path, "an absolute path")
        if not hashed:
            for pattern, what in _RAW_KEYS:
                if pattern.search(text):
                    reject(path, f"a raw database key ({what})")
                    break
            else:
                if any(p.search(text) for p in _CREDENTIALS):
                    reject(path, "a credential-like string")
    return found


def _versions() -> dict[str, str]:
    import apsw

    found = {
        "cwa": __version__,
        "python": platform.python_version(),
        "sqlite": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
        "platform": f"{platform.system()}-{platform.machine()}",
    }
    for package in ("sqlite-vec", "onnxruntime", "tokenizers", "orjson", "click", "blake3"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "absent"
    return found


def source_blake3() -> str:
    """blake3 over the installed cwa package: each file's path (relative) and bytes, in order."""
    root = Path(__file__).resolve().parent
    digest = blake3.blake3()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _timed(work: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = work()
    return result, round(time.perf_counter() - started, 3)


def collect(call: Callable[[str, Any], dict[str, Any]], now: str, gates: bool = True) -> dict[str, Any]:
    """Run the verification (doctor, the archive's totals, the hint gates) and keep aggregates."""
    doctor, doctor_seconds = _timed(lambda: call("doctor", {}))
    status, status_seconds = _timed(lambda: call("status", {"archive": True}))
    checks = [_doctor_check(doctor, doctor_seconds), {"name": "status", "exitStatus": 0, "seconds": status_seconds}]
    documents = status["documents"]
    archive = {
        "projects": status["projects"],
        "sessions": status["sessions"],
        "documents": {
            "total": documents["total"],
            "byState": documents["byState"],
            "byKind": documents["byKind"],
            "byClass": documents["byClass"],
        },
        "messages": status["messages"],
        "chunks": status["chunks"],
        "bytes": status["bytes"],
    }
    return _record(now, status["schemaVersion"], archive, checks, gates)


def collect_damaged(doctor: dict[str, Any], error: CwaError, now: str, gates: bool = True) -> dict[str, Any]:
    """The record of a run on an archive too damaged to open: the doctor's file checks failed,
    the totals could not be read (the error's exit status), and the archive holds no counts."""
    checks = [
        _doctor_check(doctor, 0.0),
        {"name": "status", "exitStatus": error.exit_code, "seconds": 0.0, "error": error.code},
    ]
    return _record(now, None, None, checks, gates)


def _doctor_check(doctor: dict[str, Any], seconds: float) -> dict[str, Any]:
    return {
        "name": "doctor",
        "exitStatus": 0 if doctor["healthy"] else 1,
        "seconds": seconds,
        "results": {c["name"]: c["ok"] for c in doctor["checks"]},
    }


def _record(
    now: str, schema: int | None, archive: dict[str, Any] | None, checks: list[dict[str, Any]], gates: bool
) -> dict[str, Any]:
    if gates:
        from cwa.hint_gates import evaluate, load_fixture

        report, seconds = _timed(lambda: evaluate(load_fixture(None)))
        checks.append(
            {
                "name": "hint-gates",
                "exitStatus": 0 if report["passed"] else 1,
                "seconds": seconds,
                "fixtureFingerprint": report["fingerprint"],
                "gates": {g["metric"]: g["passed"] for g in report["gates"]},
                "metrics": {k: v for k, v in report["metrics"].items() if isinstance(v, (int, float))},
            }
        )
    return {
        "kind": RECORD_KIND,
        "version": RECORD_VERSION,
        "createdAt": now,
        "versions": _versions(),
        "sourceBlake3": source_blake3(),
        "schemaVersion": schema,
        "archive": archive,
        "checks": checks,
        "passed": all(c["exitStatus"] == 0 for c in checks),
    }
