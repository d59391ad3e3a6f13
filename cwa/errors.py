"""The one table of error codes: each code has one exception type and one CLI exit code.

Every failure a caller can cause is raised as a `CwaError` subclass; `cwa call`, `cwa serve`
and the human commands turn it into `{"code", "message", "details"}` and the exit code below.
"""

from __future__ import annotations

from typing import Any


class CwaError(Exception):
    code = "internal"
    exit_code = 70

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class InvalidRequest(CwaError):
    """The request is malformed: unknown field, wrong type, bad value, bad JSON."""

    code = "invalid-request"
    exit_code = 2


class NotFound(CwaError):
    code = "not-found"
    exit_code = 3


class Conflict(CwaError):
    """The request is well formed but contradicts what the archive holds."""

    code = "conflict"
    exit_code = 4


class LimitExceeded(CwaError):
    code = "limit-exceeded"
    exit_code = 5


class StorageBusy(CwaError):
    """Another writer held the archive lock for longer than the busy timeout."""

    code = "storage-busy"
    exit_code = 6


class ArchiveIncompatible(CwaError):
    """The file is not a cwa archive this version can open (newer schema, not a database)."""

    code = "archive-incompatible"
    exit_code = 7


class ArchiveCorrupt(CwaError):
    """SQLite reports the archive file damaged (a bad page, a truncated file): restore it from a
    copy; cwa changes nothing in it meanwhile."""

    code = "archive-corrupt"
    exit_code = 12


class StorageUnavailable(CwaError):
    """The archive file or its directory cannot be opened or written (permissions, I/O)."""

    code = "storage-unavailable"
    exit_code = 8


class ModelMissing(CwaError):
    """A step that needs a local model was asked for explicitly, and the model is not installed."""

    code = "model-unavailable"
    exit_code = 9


class DownloadFailed(CwaError):
    """`cwa models install*` could not fetch or verify a model (offline, HTTP error, wrong bytes)."""

    code = "download-failed"
    exit_code = 10


class DiskLow(CwaError):
    """Free space on the archive's file system is below `diskCriticalMebibytes`: writes are refused
    before anything is written; reads keep working."""

    code = "disk-low"
    exit_code = 11


class UnsupportedFormat(CwaError):
    """Another agent's session store holds something this cwa cannot read (a line of an unknown
    type, a newer format): named by file and line; the rest of the import went on."""

    code = "unsupported-format"
    exit_code = 13


class Internal(CwaError):
    code = "internal"
    exit_code = 70


ERROR_TYPES: tuple[type[CwaError], ...] = (
    InvalidRequest,
    NotFound,
    Conflict,
    LimitExceeded,
    StorageBusy,
    ArchiveIncompatible,
    ArchiveCorrupt,
    StorageUnavailable,
    ModelMissing,
    DownloadFailed,
    DiskLow,
    UnsupportedFormat,
    Internal,
)

EXIT_CODES: dict[str, int] = {t.code: t.exit_code for t in ERROR_TYPES}
