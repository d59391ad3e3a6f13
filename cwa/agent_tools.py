"""The archive tools an agent host offers its model (names, descriptions and parameters in
cwa/integrations/routing.json), run against an Archive. The MCP server uses these; the Pi
extension does the same calls in TypeScript through `cwa serve`.

Each tool returns (text for the model, structured details). A caller's mistake is an
`InvalidRequest` (or another typed error), never a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cwa.errors import Conflict, InvalidRequest

Call = Callable[[str, Any], dict[str, Any]]


@dataclass(frozen=True)
class Scope:
    project: str
    session_id: str

    def params(self) -> dict[str, str]:
        return {"project": self.project, "sessionId": self.session_id}


def _scope_name(value: Any) -> str:
    return "session" if value == "session" else "project"


def gather(call: Call, scope: Scope, p: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    answer = call(
        "gather",
        {
            **scope.params(),
            "query": p.get("query"),
            "intent": p.get("intent", "auto"),
            "scope": _scope_name(p.get("scope")),
            **({"maxTokens": p["maxTokens"]} if p.get("maxTokens") else {}),
        },
    )
    return answer["rendered"], answer


def search(call: Call, scope: Scope, p: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if not p.get("query") and not p.get("relation"):
        raise InvalidRequest("give a query, a relation, or both", field="query", reason="missing")
    answer = call(
        "search",
        {
            **scope.params(),
            **({"query": p["query"]} if p.get("query") else {}),
            **({"relation": p["relation"]} if p.get("relation") else {}),
            "scope": _scope_name(p.get("scope")),
            "limit": p.get("limit", 5),
            "render": True,
        },
    )
    return answer["rendered"], answer


def recall(call: Call, scope: Scope, p: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if bool(p.get("locator")) == bool(p.get("documentId")):
        raise InvalidRequest("give exactly one of locator or documentId", field="locator", reason="missing")
    target = {"locator": p["locator"]} if p.get("locator") else {"documentId": p["documentId"]}
    answer = call(
        "recall",
        {
            "project": scope.project,
            **target,
            **({"maxTokens": p["maxTokens"]} if p.get("maxTokens") else {}),
            "render": True,
        },
    )
    return answer["rendered"], answer


def traverse(call: Call, scope: Scope, p: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    anchors = [key for key in ("locator", "documentId", "cursor") if p.get(key)]
    if len(anchors) != 1:
        raise InvalidRequest("give exactly one of locator, documentId or cursor", field="locator", reason="missing")
    answer = call(
        "traverse",
        {
            "project": scope.project,
            anchors[0]: p[anchors[0]],
            "direction": p.get("direction", "after"),
            **({"limit": p["limit"]} if p.get("limit") else {}),
        },
    )
    more = f"\n[more: call again with cursor {answer['cursor']}]" if answer.get("cursor") else ""
    return (answer.get("rendered") or answer["status"]) + more, answer


def supersede(call: Call, scope: Scope, p: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    document_id, replacement, note = p.get("documentId"), p.get("replacement"), p.get("note")
    if bool(replacement) == bool(note):
        raise InvalidRequest("give exactly one of replacement or note", field="replacement", reason="missing")
    if replacement:
        answer = call(
            "supersede", {"project": scope.project, "documentId": document_id, "by": {"documentId": replacement}}
        )
        by = answer["replacement"]
    else:
        current = call("get", {"project": scope.project, "documentId": document_id, "range": {"start": 0, "end": 0}})
        answer = call(
            "admit",
            {
                **scope.params(),
                "kind": "decision",
                "messages": [{"role": "user", "text": note}],
                "supersedes": {"documentId": document_id, "version": current["version"]},
                "metadata": {"cwa": {"note": "supersedes", "documentId": document_id}},
            },
        )
        by = {"documentId": answer["documentId"], "version": answer["version"]}
    return f"{document_id} is superseded by {by['documentId']} v{by['version']}", answer


def archive(call: Call, scope: Scope, p: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Remember exactly: `text`, or `messages` ([{role, text}]), as a durable `manual` document;
    a `subjectKey` already held is superseded."""
    if bool(p.get("text")) == bool(p.get("messages")):
        raise InvalidRequest("give exactly one of text or messages", field="text", reason="missing")
    messages = [{"role": "user", "text": p["text"]}] if p.get("text") else p["messages"]
    request = {
        **scope.params(),
        "kind": "manual",
        "retentionClass": "durable",
        "messages": messages,
        "metadata": {"cwa": {"type": p.get("type", "note")}},
        **({"subjectKey": p["subjectKey"]} if p.get("subjectKey") else {}),
    }
    try:
        answer = call("admit", request)
    except Conflict as held:
        if held.details.get("reason") != "subject-held":
            raise
        answer = call(
            "admit",
            {**request, "supersedes": {"documentId": held.details["documentId"], "version": held.details["version"]}},
        )
    verb = "archived" if answer["created"] else "already archived"
    subject = f" (subject {p['subjectKey']})" if p.get("subjectKey") else ""
    return f"{verb} as {answer['documentId']} v{answer['version']}{subject}", answer


def status(call: Call, scope: Scope, p: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    found = call("status", {"project": scope.project})
    documents = found["documents"]
    states = ", ".join(f"{n} {state}" for state, n in sorted(documents["byState"].items()))
    text = (
        f"cwa archive {found['path']} (schema {found['schemaVersion']}): this project holds "
        f"{documents['total']} document(s){f' ({states})' if states else ''} in {found['sessions']} session(s); "
        f"{found['bytes']['logical']:,} bytes archived. Session {scope.session_id}."
    )
    return text, found


TOOLS: dict[str, Callable[[Call, Scope, dict[str, Any]], tuple[str, dict[str, Any]]]] = {
    "context_window_gather": gather,
    "context_window_search": search,
    "context_recall": recall,
    "context_window_traverse": traverse,
    "context_window_supersede": supersede,
    "context_window_archive": archive,
    "context_window_status": status,
}
