"""cwa's own pages in `cwa browse` (a Datasette plugin loaded with `--plugins-dir`):

- `/-/cwa/search`: cwa's search (exact, BM25F, structural, semantic when embedded), and
  `/-/cwa/hit`: the exact text of a hit (or of a document) among the records around it;
- `/-/cwa/sessions` and `/-/cwa/session`: projects' sessions by date with their lineage, and one
  session's archived messages in order, rotations, externalized outputs and oversized inputs marked;
- `/-/cwa/hints`: each preflight decision of a session beside its user message;
- `/-/cwa`: the archive at a glance (size by kind, growth per day, retention due, index lag, health).

All read the archive through a read-only connection of their own (cwa/store/connection.py,
`open_read_only`): nothing is written, not even a search lease. Archived text reaches the page
only through Datasette's templates, which escape it: HTML or a forged cwa label in an archive is
shown as the text it is.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from datasette import Response, hookimpl

from cwa.browse import VIEWS

HOME_PATH = "/-/cwa"
SEARCH_PATH = "/-/cwa/search"
HIT_PATH = "/-/cwa/hit"
SESSIONS_PATH = "/-/cwa/sessions"
SESSION_PATH = "/-/cwa/session"
HINTS_PATH = "/-/cwa/hints"
PATHS = {
    "home_path": HOME_PATH,
    "search_path": SEARCH_PATH,
    "hit_path": HIT_PATH,
    "sessions_path": SESSIONS_PATH,
    "session_path": SESSION_PATH,
    "hints_path": HINTS_PATH,
}
GROWTH_DAYS = 30
DUE_SOON_SECONDS = 7 * 86_400
HEALTH_SAMPLE = 20  # documents and windows the page's health check compares with their digests
DATABASE = "archive"
RESULTS = 20  # results shown
POOL = 100  # results searched before the kind and date filters
AROUND = 3  # records shown before and after a hit
KINDS = ("turn", "tool-result", "decision", "note", "summary", "checkpoint-root", "preamble")


@hookimpl
def register_routes():
    return [
        (r"^/$", front_page),
        (rf"^{HOME_PATH}/?$", glance_page),
        (rf"^{SEARCH_PATH}$", search_page),
        (rf"^{HIT_PATH}$", hit_page),
        (rf"^{SESSIONS_PATH}$", sessions_page),
        (rf"^{SESSION_PATH}$", session_page),
        (rf"^{HINTS_PATH}$", hints_page),
    ]


@hookimpl
def menu_links(datasette):
    return [
        {"href": SEARCH_PATH, "label": "Search the archive"},
        {"href": SESSIONS_PATH, "label": "Sessions"},
        {"href": HOME_PATH, "label": "The archive at a glance"},
    ]


async def front_page() -> Response:
    """The front page is the search page; Datasette's own list of databases is at /-/databases."""
    return Response.redirect(SEARCH_PATH)


async def _render(datasette: Any, request: Any, template: str, context: dict[str, Any], status: int = 200):
    page = await datasette.render_template(template, {**PATHS, **context}, request=request)
    return Response.html(page, status=status)


def _rows(archive: Any, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    from cwa.store.sqlfiles import queries

    cursor = archive.conn.cursor()
    cursor.row_trace = lambda c, row: dict(zip((d[0] for d in c.getdescription()), row))
    return list(cursor.execute(queries("browse")[name], params))


def _archive_path(datasette: Any) -> Path:
    return Path(datasette.get_database(DATABASE).path).resolve()


def _open(datasette: Any):
    from cwa.api import Archive
    from cwa.config import load_settings
    from cwa.store.connection import open_read_only

    path = _archive_path(datasette)
    return Archive(open_read_only(path), path, settings=load_settings(None))


def marked(text: str, query: str) -> list[tuple[str, bool]]:
    """`text` cut into (piece, is a match) for the words of `query` (a word's start, any case):
    the template escapes each piece and wraps the matches in <mark>."""
    words = sorted({w for w in re.findall(r"\w+", query.lower()) if len(w) > 1}, key=len, reverse=True)
    if not words or not text:
        return [(text, False)]
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(re.escape(w) for w in words) + r")\w*", re.IGNORECASE)
    pieces, at = [], 0
    for match in pattern.finditer(text):
        if match.start() > at:
            pieces.append((text[at : match.start()], False))
        pieces.append((match.group(), True))
        at = match.end()
    if at < len(text):
        pieces.append((text[at:], False))
    return pieces


def _projects(archive: Any) -> list[tuple[str, int]]:
    """The projects holding live documents, most first (status's list, without its other counts)."""
    from cwa.store.sqlfiles import queries

    return archive.conn.execute(queries("status")["projects_held"]).fetchall()


def _why_empty(found: dict[str, Any], filtered: int, pending: int) -> list[str]:
    """What a search that shows nothing should say."""
    reasons = []
    if filtered:
        reasons.append(f"{filtered} result(s) matched but are outside the kind or dates chosen.")
    semantic = found.get("semantic") or {}
    if not semantic.get("used"):
        waiting = semantic.get("pendingWindows")
        reasons.append(
            f"Semantic search did not run: {waiting} window(s) wait for their embeddings (cwa index embed)."
            if waiting
            else "Semantic search did not run (no embeddings yet, or the model is not installed): "
            "only exact and keyword matches were looked for."
        )
    if found.get("scope") != found.get("requestedScope"):
        reasons.append(f"The scope was capped to {found.get('scope')} by the setting maxReadScope.")
    if pending:
        reasons.append(f"{pending} document(s) archived moments ago are not indexed yet.")
    return reasons


async def search_page(request: Any, datasette: Any) -> Response:
    from cwa.errors import CwaError

    args = request.args
    query = (args.get("q") or "").strip()
    project = args.get("project") or ""
    session = (args.get("session") or "").strip()
    kind = args.get("kind") or ""
    since, until = (args.get("from") or "").strip(), (args.get("to") or "").strip()
    context: dict[str, Any] = {
        "query": query,
        "project": project,
        "session": session,
        "kind": kind,
        "since": since,
        "until": until,
        "kinds": KINDS,
        "results": [],
        "reasons": [],
        "error": None,
        "searched": False,
        "notice": None,
    }
    try:
        archive = _open(datasette)
    except CwaError as error:
        context["error"] = f"{error.code}: {error.message}"
        return await _render(datasette, request, "cwa_search.html", context)
    try:
        context["projects"] = _projects(archive)
        if query and not project and archive.settings["maxReadScope"] != "all" and context["projects"]:
            # the setting keeps a search to one project: the one holding the most, said so
            project = context["project"] = context["projects"][0][0]
            context["notice"] = (
                f"Searching {project}: the setting maxReadScope ({archive.settings['maxReadScope']}) keeps "
                "a search to one project; choose another above."
            )
        if query:
            params: dict[str, Any] = {"query": query, "limit": POOL}
            if session:
                params.update(scope="session", sessionId=session, project=project or None)
            elif project:
                params.update(scope="project", project=project)
            else:
                params["scope"] = "all"
            params = {k: v for k, v in params.items() if v is not None}
            try:
                found = archive.call("search", params)
            except CwaError as error:
                context["error"] = f"{error.code}: {error.message}"
            else:
                shown = [
                    r
                    for r in found["results"]
                    if (not kind or r["kind"] == kind)
                    and (not since or r["createdAt"][:10] >= since)
                    and (not until or r["createdAt"][:10] <= until)
                ]
                context["searched"] = True
                context["results"] = [
                    {**r, "pieces": marked(r["snippet"], query), "date": r["createdAt"][:16].replace("T", " ")}
                    for r in shown[:RESULTS]
                ]
                context["found"] = len(found["results"])
                if not shown:
                    context["reasons"] = _why_empty(
                        found, len(found["results"]) - len(shown), found.get("indexPending", 0)
                    )
    finally:
        archive.close()
    return await _render(datasette, request, "cwa_search.html", context)


def _inside(record: dict[str, Any], hit: dict[str, Any]) -> bool:
    """Whether a record around the hit is already part of the exact text shown."""
    shown = record.get("shown") or {}
    return (
        (record.get("documentId"), record.get("version")) == (hit["documentId"], hit["version"])
        and hit["range"]["start"] <= shown.get("start", -1)
        and shown.get("end", 1 << 62) <= hit["range"]["end"]
    )


async def hit_page(request: Any, datasette: Any) -> Response:
    from cwa.errors import CwaError

    args = request.args
    locator, project, query = args.get("locator") or "", args.get("project") or "", args.get("q") or ""
    document, version = args.get("document") or "", args.get("version") or ""
    # a hit's signed locator, or a document (an externalized output from the session page)
    anchor: dict[str, Any] = {"locator": locator}
    if document and not locator:
        anchor = {"documentId": document, **({"version": int(version)} if version.isdigit() else {})}
    context: dict[str, Any] = {"error": None, "query": query, "project": project}
    try:
        archive = _open(datasette)
    except CwaError as error:
        context["error"] = f"{error.code}: {error.message}"
        return await _render(datasette, request, "cwa_hit.html", context, 500)
    try:
        recalled = archive.call("recall", {**anchor, "project": project, "maxTokens": 200_000})
        if recalled.get("status") != "resolved":
            context["error"] = f"this hit cannot be shown: {recalled.get('status')}"
            return await _render(datasette, request, "cwa_hit.html", context, 404)
        around = {
            direction: archive.call(
                "traverse",
                {"project": project, **anchor, "direction": direction, "limit": AROUND, "maxTokens": 4_000},
            )
            for direction in ("before", "after")
        }
    except CwaError as error:
        context["error"] = f"{error.code}: {error.message}"
        return await _render(datasette, request, "cwa_hit.html", context, 400)
    finally:
        archive.close()
    context.update(
        hit=recalled,
        pieces=marked(recalled.get("text", ""), query),
        before=[r for r in reversed(around["before"].get("records", [])) if not _inside(r, recalled)],
        after=[r for r in around["after"].get("records", []) if not _inside(r, recalled)],
    )
    return await _render(datasette, request, "cwa_hit.html", context)


SHOWN_BYTES = 4_000  # of a message's text on the session and hints pages


def _head(archive: Any, row: dict[str, Any]) -> tuple[str, bool]:
    """The first SHOWN_BYTES of a message's text (its chunks only, not the whole document), and
    whether it goes on; ("", False) for a message not archived."""
    from cwa.store.reads import read_bytes

    if row.get("document_row") is None:
        return "", False
    start, end = row["text_start"], row["end_byte"]
    data, _ = read_bytes(archive.conn, row["document_row"], start, min(end, start + SHOWN_BYTES))
    return data.decode("utf-8", errors="ignore"), end - start > SHOWN_BYTES


async def sessions_page(request: Any, datasette: Any) -> Response:
    project = request.args.get("project") or ""
    archive = _open(datasette)
    try:
        sessions = _rows(archive, "page_sessions", {"project": project})
        projects = _projects(archive)
    finally:
        archive.close()
    for row in sessions:
        row["rotations"] = max(0, (row["epoch"] or 1) - 1)
    return await _render(
        datasette, request, "cwa_sessions.html", {"project": project, "projects": projects, "sessions": sessions}
    )


async def session_page(request: Any, datasette: Any) -> Response:
    project, session = request.args.get("project") or "", request.args.get("session") or ""
    archive = _open(datasette)
    try:
        records = _rows(archive, "page_session_records", {"project": project, "session": session})
        hints = len(_rows(archive, "page_hints", {"project": project, "session": session}))
        current = _rows(archive, "page_session_epoch", {"project": project, "session": session})
        rotations = _rows(archive, "page_session_rotations", {"project": project, "session": session})
        for record in records:
            record["text"], record["clipped"] = _head(archive, record)
    finally:
        archive.close()
    for record in records:
        record["live_from"] = bool(current) and current[0]["cut_key"] == record["message_key"]
        record["epochs"] = [r for r in rotations if r["cut_key"] == record["message_key"]]
    shown = {r["message_key"] for r in records}
    context = {"project": project, "session": session, "records": records, "hints": hints}
    context["epoch"] = current[0]["epoch"] if current else None
    context["unplaced"] = [r for r in rotations if r["cut_key"] not in shown]  # cut at a message not archived
    return await _render(datasette, request, "cwa_session.html", context)


async def hints_page(request: Any, datasette: Any) -> Response:
    project, session = request.args.get("project") or "", request.args.get("session") or ""
    from cwa.errors import CwaError

    archive = _open(datasette)
    try:
        hints = _rows(archive, "page_hints", {"project": project, "session": session})
        for hint in hints:
            hint["user_text"], _ = _head(archive, hint)
            hint["why"] = f"cwa why --project '{project}' --session {session} --message-key {hint['message_key']}"
            try:  # what `cwa why` says: the measures the decision was made on
                asked = {"project": project, "sessionId": session, "messageKey": hint["message_key"]}
                metrics = archive.call("why", asked)["metrics"]
            except CwaError:
                metrics = {}
            hint["metrics"] = [
                (name, ("yes" if value else "no") if isinstance(value, bool) else value)
                for name, value in metrics.items()
                if value is not None
            ]
    finally:
        archive.close()
    return await _render(datasette, request, "cwa_hints.html", {"project": project, "session": session, "hints": hints})


def _bars(growth: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The growth chart's bars (oldest first): day, bytes, and a height in percent of the largest."""
    days = list(reversed(growth))
    top = max((d["bytes"] or 0 for d in days), default=0) or 1
    return [{**d, "height": max(1, round(100 * (d["bytes"] or 0) / top))} for d in days]


async def glance_page(request: Any, datasette: Any) -> Response:
    from cwa.store import doctor, index_queue
    from cwa.store.sqlfiles import queries
    from cwa.timestamps import shift

    archive = _open(datasette)
    try:
        now = archive.clock()
        status = archive.status({})
        by_kind = _rows(archive, "bytes_by_kind", {})
        growth = _rows(archive, "page_growth", {"days": GROWTH_DAYS})
        due = queries("browse")["page_due"]
        soon, next_due = archive.conn.execute(due, {"soon": shift(now, DUE_SOON_SECONDS)}).fetchone()
        lag = index_queue.lag(archive.conn, now)
        checks = [
            *doctor.derived(archive.conn, HEALTH_SAMPLE),
            doctor.checkpoints(archive.conn),
            doctor.permissions(archive.path),
            doctor.disk(archive.path, archive.settings["diskCriticalMebibytes"]),
            doctor.hooks(archive.path),
        ]
    finally:
        archive.close()
    context = {
        "status": status,
        "by_kind": by_kind,
        "bars": _bars(growth),
        "due_soon": soon,
        "next_due": next_due,
        "lag": lag,
        "checks": checks,
        "healthy": all(c["ok"] for c in checks),
        "sample": HEALTH_SAMPLE,
        "views": [(name, title, text) for name, (title, text) in VIEWS.items()],
    }
    return await _render(datasette, request, "cwa_glance.html", context)
