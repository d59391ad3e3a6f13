"""A Datasette plugin that `cwa browse` loads (`--plugins-dir`): the SQL functions cwa's views
call, on each of Datasette's connections, so its table pages show them as `sqlite3` and cwa do
(`document_texts` inflates chunk payloads with `sqlar_uncompress`: cwa/store/payloads.py)."""

from __future__ import annotations

from typing import Any

from datasette import hookimpl

from cwa.store.payloads import SQL_FUNCTION, sql_uncompress


@hookimpl
def prepare_connection(conn: Any) -> None:
    conn.create_function(SQL_FUNCTION, 2, sql_uncompress, deterministic=True)
