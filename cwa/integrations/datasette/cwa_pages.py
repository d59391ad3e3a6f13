"""cwa's own pages in `cwa browse` (a Datasette plugin loaded with `--plugins-dir`): a search
page that runs cwa's search (exact, BM25F, structural, semantic when embedded) and a page with the
exact text of a hit among the turns around it.

Both read the archive through a read-only connection of their own (cwa/store/connection.py,
`open_read_only`): nothing is written, not even a search lease. Archived text reaches the page
only through Datasette's templates, which escape it: HTML or a forged cwa label in an archive is
shown as the text it is.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from datasette import Response, hookimpl

SEARCH_PATH = "/-/cwa/search"
HIT_PATH = "/-/cwa/hit"
DATABASE = "archive"
RESULTS = 20  # results shown
POOL = 100  # results searched before the kind and date filters
AROUND = 3  # records shown before and after a hit
KINDS = ("turn", "tool-result", "decision", "note", "summary", "checkpoint-root", "preamble")


@hookimpl
def register_routes():
    return [(rf"^{SEARCH_PATH}$", search_page), (rf"^{HIT_PATH}$", hit_page)]


@hookimpl
def menu_links(datasette):
    return [{"href": SEARCH_PATH, "label": "Search the archive"}]


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
    return [(p["project"], p["documents"]) for p in archive.status({})["projectsHeld"]]


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
        "hit_path": HIT_PATH,
        "search_path": SEARCH_PATH,
    }
    try:
        archive = _open(datasette)
    except CwaError as error:
        context["error"] = f"{error.code}: {error.message}"
        return Response.html(await datasette.render_template("cwa_search.html", context, request=request))
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
    return Response.html(await datasette.render_template("cwa_search.html", context, request=request))


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
    context: dict[str, Any] = {"error": None, "query": query, "project": project, "search_path": SEARCH_PATH}
    try:
        archive = _open(datasette)
    except CwaError as error:
        context["error"] = f"{error.code}: {error.message}"
        return Response.html(await datasette.render_template("cwa_hit.html", context, request=request), status=500)
    try:
        recalled = archive.call("recall", {"locator": locator, "project": project, "maxTokens": 200_000})
        if recalled.get("status") != "resolved":
            context["error"] = f"this hit cannot be shown: {recalled.get('status')}"
            return Response.html(await datasette.render_template("cwa_hit.html", context, request=request), status=404)
        around = {
            direction: archive.call(
                "traverse",
                {"project": project, "locator": locator, "direction": direction, "limit": AROUND, "maxTokens": 4_000},
            )
            for direction in ("before", "after")
        }
    except CwaError as error:
        context["error"] = f"{error.code}: {error.message}"
        return Response.html(await datasette.render_template("cwa_hit.html", context, request=request), status=400)
    finally:
        archive.close()
    context.update(
        hit=recalled,
        pieces=marked(recalled.get("text", ""), query),
        before=[r for r in reversed(around["before"].get("records", [])) if not _inside(r, recalled)],
        after=[r for r in around["after"].get("records", []) if not _inside(r, recalled)],
    )
    return Response.html(await datasette.render_template("cwa_hit.html", context, request=request))
