"""Offline evaluation of evidence routing (cwa/routing.py): does a model, given exactly the
guidance cwa ships, consult the archive when prior meaning matters and live state when current
state matters, and does a continuity marker change that the right way?

Cases (cases.jsonl) come in pairs that differ only by the marker's presence; each is annotated
`archive | live | both | neither`. `render` builds the exact prompt, a configured model answers
it, `parse` reads its route, `score` gives accuracy and false archive searches (an archive route
where none was wanted). Every result records the guidance fingerprint; results of other guidance
are refused when scored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from cwa import routing
from cwa.retrieve.hint_text import render_marker

ROUTES = ("archive", "live", "both", "neither")
CASES = Path(__file__).with_name("cases.jsonl")
_ROUTE_LINE = re.compile(r"^\s*ROUTE:\s*(archive|live|both|neither)\s*$", re.IGNORECASE | re.MULTILINE)

QUESTION = (
    "Before you answer the user, decide which sources you must consult. "
    "Reply with exactly one line, ROUTE: archive, ROUTE: live, ROUTE: both or ROUTE: neither "
    "(archive: the cwa archive tools; live: reading files, running tests or commands; both; neither: "
    "answer directly), then nothing else."
)


class StaleResults(ValueError):
    """Results recorded under other guidance than the one installed."""


def load_cases(path: Path = CASES) -> list[dict[str, Any]]:
    cases = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    for case in cases:
        if case["expected"] not in ROUTES:
            raise ValueError(f"case {case['id']}: expected must be one of {ROUTES}")
    return cases


def render(case: dict[str, Any]) -> dict[str, str]:
    """The exact prompt: a system part (the routing guidelines and the archive tools as the model
    sees them) and a user part (the message, followed by the marker exactly as cwa inserts it)."""
    unit = routing.guidance()
    tools = "\n".join(f"- {name}: {tool['description']}" for name, tool in unit["tools"].items())
    system = (
        f"{routing.guidelines_text()}\n\nArchive tools:\n{tools}\n\n"
        "Live tools: read (a file), bash (run a command or a test), edit, write."
    )
    user = case["message"]
    if case.get("marker"):
        user += render_marker(tuple(case["marker"]))
    return {"system": system, "user": f"{user}\n\n{QUESTION}"}


def parse(answer: str) -> str | None:
    """The route a model's raw answer names (its last ROUTE line), or None."""
    found = _ROUTE_LINE.findall(answer)
    return found[-1].lower() if found else None


def result_of(case: dict[str, Any], answer: str, model: str) -> dict[str, Any]:
    return {
        "id": case["id"],
        "marker": bool(case.get("marker")),
        "expected": case["expected"],
        "model": model,
        "fingerprint": routing.fingerprint(),
        "answer": answer,
        "route": parse(answer),
    }


def score(results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy overall and by marker presence; false archive searches (an archive or both route
    where the case wanted live or neither), and answers without a route."""
    results = list(results)
    current = routing.fingerprint()
    stale = {r["fingerprint"] for r in results} - {current}
    if stale:
        raise StaleResults(f"results of guidance {sorted(stale)} cannot be scored against {current}")

    def part(rows: list[dict[str, Any]]) -> dict[str, Any]:
        wanted_none = [r for r in rows if r["expected"] in ("live", "neither")]
        false_archive = sum(1 for r in wanted_none if r["route"] in ("archive", "both"))
        return {
            "cases": len(rows),
            "accuracy": round(sum(r["route"] == r["expected"] for r in rows) / len(rows), 4) if rows else None,
            "falseArchiveSearches": false_archive,
            "falseArchiveRate": round(false_archive / len(wanted_none), 4) if wanted_none else None,
            "unparsed": sum(1 for r in rows if r["route"] is None),
        }

    return {
        "fingerprint": current,
        **part(results),
        "withMarker": part([r for r in results if r["marker"]]),
        "withoutMarker": part([r for r in results if not r["marker"]]),
    }
