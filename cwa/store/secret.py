"""The archive's own secret: 32 random bytes created with the file (migration 0001) that never
leave it. Locators, checkpoint catalogs and confirm tokens are signed with it, so each is valid
only for the archive that issued it."""

from __future__ import annotations

import hashlib
import hmac

import apsw

from cwa.store.sqlfiles import queries


def archive_secret(conn: apsw.Connection) -> bytes:
    return conn.execute(queries("reads")["locator_secret"]).fetchone()[0]


def archive_mac(conn: apsw.Connection, data: bytes, chars: int = 16) -> str:
    """A hex HMAC-SHA256 of `data` under the archive's secret, cut to `chars`: proof that this
    archive produced something (a catalog, a confirm token) without revealing the secret."""
    return hmac.new(archive_secret(conn), data, hashlib.sha256).hexdigest()[:chars]
