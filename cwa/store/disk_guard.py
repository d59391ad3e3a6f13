"""The disk guard: refuse to write an archive whose file system is nearly full.

SQLite fails mid-transaction when the disk fills (and rolls back), but a full disk also breaks
everything else on the machine; below `diskCriticalMebibytes` of free space cwa stops admitting before
it writes anything, with `disk-low`, and keeps answering reads.
"""

from __future__ import annotations

import shutil
from functools import lru_cache
from pathlib import Path

from cwa.errors import DiskLow

# A bulk admission (`Archive.admit_many`, `cwa import`) asks at most this often, not once a
# document (a `statvfs` each): between two checks it writes far less than any sensible limit.
BULK_CHECK_SECONDS = 0.1


def check_free_space(archive_path: Path | str, critical_mib: int) -> None:
    if critical_mib <= 0:
        return
    folder = _folder(str(archive_path))
    free = shutil.disk_usage(folder).free
    if free < critical_mib * (1 << 20):
        raise DiskLow(
            f"only {free // (1 << 20)} MiB free where the archive lives (diskCriticalMebibytes is {critical_mib}): "
            "nothing was written; free some space or lower diskCriticalMebibytes",
            freeBytes=free,
            criticalBytes=critical_mib * (1 << 20),
            path=str(folder),
        )


@lru_cache(maxsize=64)
def _folder(archive_path: str) -> Path:
    """The folder holding the archive, resolved once per process (every admission asks)."""
    return Path(archive_path).expanduser().resolve().parent
