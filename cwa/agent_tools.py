"""The archive tools an agent host offers its model, implemented once: every host (the Pi
extension through `cwa serve`, the MCP server) forwards a call to the `tool` method, which lands
here. Names, descriptions and JSON Schema parameters are in cwa/integrations/routing.json.

A tool checks its arguments against those parameters (and the rules below that JSON Schema
cannot say), runs archive methods through `call`, and answers `{text, details, isError}`: the
text the model reads, the structured answer, and whether it is a refusal. A caller's mistake is
a refusal with its typed error code, never a crash.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cwa import contract, routing
from cwa.errors import Conflict, CwaError, InvalidRequest

Call = Callable[[str, Any], dict[str, Any]]
Answer = tuple[str, dict[str, Any]]

DEFAULT_SEARCH_RESULTS = 5
ERROR_TEXT_CHARS = 1000  # of an error message, in the text the model reads


@dataclass(frozen=True)
class Scope:
    project: str
    session_id: str
    parent_session_id: str | None = None

    def params(self) -> dict[str, str]:
        parent = {"parentSessionId": self.parent_session_id} if self.parent_session_id else {}
        return {"project": self.project, "sessionId": self.session_id, **parent}


def _present(p: dict[str, Any], *keys: str) -> dict[str, Any]:
    """The arguments among `keys` that were given, to pass on as they are."""
    return {key: p[key] for key in keys if key in p}


def gather(call: Call, scope: Scope, p: dict[str, Any]) -> Answer:
    answer = call(
        "gather", {**scope.params(), "intent": "auto", **_present(p, "query", "intent", "scope", "maxTokens")}
    )
    return answer["rendered"], answer


def search(call: Call, scope: Scope, p: dict[str, Any]) -> Answer:
    request = {**scope.params(), "limit": DEFAULT_SEARCH_RESULTS, **_present(p, "query", "relation", "scope", "limit")}
    answer = call("search", {**request, "render": True})
    return answer["rendered"], answer


def recall(call: Call, scope: Scope, p: dict[str, Any]) -> Answer:
    answer = call(
        "recall", {"project": scope.project, **_present(p, "locator", "documentId", "maxTokens"), "render": True}
    )
    return answer["rendered"], answer


def traverse(call: Call, scope: Scope, p: dict[str, Any]) -> Answer:
    request = {"project": scope.project, "direction": "after"}
    answer = call("traverse", {**request, **_present(p, "locator", "documentId", "cursor", "direction", "limit")})
    more = f"\n[more: call again with cursor {answer['cursor']}]" if answer.get("cursor") else ""
    return (answer.get("rendered") or answer["status"]) + more, answer


def supersede(call: Call, scope: Scope, p: dict[str, Any]) -> Answer:
    by = {"by": {"documentId": p["replacement"]}} if "replacement" in p else {"note": p["note"]}
    answer = call("supersede", {**scope.params(), "documentId": p["documentId"], **by})
    replacement = answer["replacement"]
    return f"{p['documentId']} is superseded by {replacement['documentId']} v{replacement['version']}", answer


def archive(call: Call, scope: Scope, p: dict[str, Any]) -> Answer:
    """Remember exactly: `text`, or `messages` ([{role, text}]), as a durable `manual` document;
    a `subjectKey` already held is superseded."""
    messages = [{"role": "user", "text": p["text"]}] if "text" in p else p["messages"]
    request = {
        **scope.params(),
        "kind": "manual",
        "retentionClass": "durable",
        "messages": messages,
        "metadata": {"cwa": {"type": p.get("type", "note")}},
        **_present(p, "subjectKey"),
    }
    try:
        answer = call("admit", request)
    except Conflict as held:
        if held.details.get("reason") != "subject-held":
            raise
        holder = {"documentId": held.details["documentId"], "version": held.details["version"]}
        answer = call("admit", {**request, "supersedes": holder})
    verb = "archived" if answer["created"] else "already archived"
    subject = f" (subject {p['subjectKey']})" if p.get("subjectKey") else ""
    return f"{verb} as {answer['documentId']} v{answer['version']}{subject}", answer


def status(call: Call, scope: Scope, p: dict[str, Any]) -> Answer:
    found = call("status", {"project": scope.project})
    documents = found["documents"]
    states = ", ".join(f"{n} {state}" for state, n in sorted(documents["byState"].items()))
    text = (
        f"cwa archive {found['path']} (schema {found['schemaVersion']}): this project holds "
        f"{documents['total']} document(s){f' ({states})' if states else ''} in {found['sessions']} session(s); "
        f"{found['bytes']['logical']:,} bytes archived. Session {scope.session_id}."
    )
    return text, found


TOOLS: dict[str, Callable[[Call, Scope, dict[str, Any]], Answer]] = {
    "context_window_gather": gather,
    "context_window_search": search,
    "context_recall": recall,
    "context_window_traverse": traverse,
    "context_window_supersede": supersede,
    "context_window_archive": archive,
    "context_window_status": status,
}

# What a tool's JSON Schema cannot say (a model-facing schema stays a plain object: some
# providers refuse a top-level oneOf). The methods behind search, recall and traverse check
# their own "one of" rules in their contract schemas.
RULES: dict[str, dict[str, tuple[str, ...]]] = {
    "context_window_supersede": {"exactly_one": ("replacement", "note")},
    "context_window_archive": {"exactly_one": ("text", "messages")},
}


@functools.cache
def arguments_schema(name: str) -> contract.Obj:
    """The contract form of a tool's parameters (routing.json) with its extra rules."""
    parameters = routing.guidance()["tools"][name]["parameters"]
    return contract.from_json_schema(parameters, **RULES.get(name, {}))


def run(call: Call, scope: Scope, name: str, arguments: dict[str, Any], host: str) -> dict[str, Any]:
    """One tool call as the model sees its answer: `{text, details, isError}`."""
    try:
        if name not in TOOLS or name not in routing.tool_names(host):
            raise InvalidRequest(
                f"unknown tool {name[:64]}", field="name", reason="unknown-tool", allowed=routing.tool_names(host)
            )
        checked = contract.validate(arguments_schema(name), arguments)
        text, details = TOOLS[name](call, scope, checked)
        return {"text": text, "details": details, "isError": False}
    except CwaError as error:
        return refusal(error)


def refusal(error: CwaError) -> dict[str, Any]:
    """A typed error as a tool answer: the model reads its code and message."""
    return {
        "text": f"cwa {error.code}: {error.message[:ERROR_TEXT_CHARS]}",
        "details": {"error": error.to_json()},
        "isError": True,
    }
