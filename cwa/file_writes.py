"""Files cwa writes for the user (settings entries, evidence records): whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

from cwa.errors import StorageUnavailable


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder, flushed to disk and
    renamed over it: a reader sees the old file or the new one, never a part; a failure leaves the
    old file and no temporary behind (`storage-unavailable`)."""
    import tempfile  # here: it imports shutil, random and the compressors, a cold start's milliseconds

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise StorageUnavailable(f"cannot write {path}: {exc.strerror}", path=str(path)) from exc
