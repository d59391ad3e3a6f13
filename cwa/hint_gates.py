"""The automatic-hint evaluation: run every fixture case through the real `preflight` method and
recompute the metrics from what it returned.

    cwa eval hints [--fixture PATH] [--json]
    python -m cwa.hint_gates --refingerprint   # after editing hint_cases.json on purpose

A case is a small corpus (admitted with real creation dates, on top of a shared background of
unrelated sessions), then steps: user messages sent to preflight in order, each with its active
and visible keys. The last step is judged against `expect`; earlier steps build up state (hints
already shown, budgets used). Every case runs in its own temporary archive.

Metrics (observations only, never the reason codes preflight reports about itself):
- markerRecall / snippetRecall: positives whose judged step revealed that kind of hint, whose
  marker spans are exactly the expected spans of the message;
- falsePositiveRate: negatives whose judged step revealed any byte;
- leakedTerms: model-visible bytes of any step holding a case's `forbidden` terms or its
  `coldNeighborTerm` (words only the candidate holds), plus markers whose variable text is not
  made of exact spans of the message;
- staleReveals: hints whose source is older than its class's automatic age limit, or durable;
- budgetViolations: a hint over `hintBudgetTokens`, or the frozen hints of a step's active keys
  (and its own) over `activeHintBudgetTokens`, both under the estimator;
- unsafeToolHints: a hint from tool output that is not a labelled JSON string, or a marker from it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import blake3
import orjson

from cwa.api import Archive
from cwa.config import Settings, load_settings
from cwa.errors import InvalidRequest
from cwa.retrieve.hint_text import SEPARATOR, marker_spans
from cwa.timestamps import age_days, parse_timestamp, shift
from cwa.tokens import estimate_tokens

FIXTURE = Path(__file__).with_name("hint_cases.json")
PROJECT = "/eval/shop"
GATES = (
    ("markerRecall", ">=", 0.90),
    ("snippetRecall", ">=", 0.90),
    ("falsePositiveRate", "<=", 0.05),
    ("leakedTerms", "==", 0),
    ("staleReveals", "==", 0),
    ("budgetViolations", "==", 0),
    ("unsafeToolHints", "==", 0),
)
AGE_LIMITS = {
    "ephemeral": "ephemeralAutoRetrievalDays",
    "conversation": "conversationAutoRetrievalDays",
    "derived": "derivedAutoRetrievalDays",
}


def fingerprint(fixture: dict[str, Any]) -> str:
    body = {k: v for k, v in fixture.items() if k != "fingerprint"}
    return blake3.blake3(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def load_fixture(path: Path | None = None) -> dict[str, Any]:
    """Read a case file. The shipped one must carry its fingerprint; any file that carries one must
    match it, so a reviewed fixture cannot change silently."""
    path = path or FIXTURE
    try:
        fixture = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise InvalidRequest(f"cannot read the case file {path}: {exc}", reason="bad-fixture") from exc
    if not isinstance(fixture, dict) or not isinstance(fixture.get("cases"), list) or "now" not in fixture:
        raise InvalidRequest(f"{path} needs an object with `now` and `cases`", reason="bad-fixture")
    shipped = path.resolve() == FIXTURE.resolve()
    if (shipped or "fingerprint" in fixture) and fixture.get("fingerprint") != fingerprint(fixture):
        raise InvalidRequest(
            f"{path} changed without updating its fingerprint "
            "(review the change, then run: python -m cwa.hint_gates --refingerprint)",
            reason="fixture-fingerprint",
        )
    fixture.setdefault("background", [])
    return fixture


def _messages(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Messages as `[role, text]`, `[role, text, key]` or admit-style objects."""
    found = []
    for message in spec["messages"]:
        if isinstance(message, dict):
            found.append(message)
        else:
            role, text, *key = message
            found.append({"role": role, "text": text, **({"key": key[0]} if key else {})})
    return found


def _document(spec: dict[str, Any], now: str, ids: list[dict[str, Any]]) -> dict[str, Any]:
    request: dict[str, Any] = {
        "project": PROJECT,
        "sessionId": spec.get("session", "earlier"),
        "kind": spec.get("kind", "turn"),
        "createdAt": spec["createdAt"] if "createdAt" in spec else shift(now, -spec["daysAgo"] * 86_400),
        "messages": _messages(spec),
    }
    if "retentionClass" in spec:
        request["retentionClass"] = spec["retentionClass"]
    if "supersedes" in spec:  # index of an earlier corpus document of the same case
        earlier = ids[spec["supersedes"]]
        request["supersedes"] = {"documentId": earlier["documentId"], "version": earlier["version"]}
    return request


def default_settings(folder: Path) -> Settings:
    """Built-in defaults only: no user or project configuration can change a gate's outcome."""
    return load_settings(None, env={"HOME": str(folder), "XDG_CONFIG_HOME": str(folder / "config")})


def run_case(case: dict[str, Any], fixture: dict[str, Any], folder: Path, settings: Settings) -> list[dict[str, Any]]:
    """Admit the background and the case's corpus, send its steps; return each step's response."""
    clock = [fixture["now"]]
    observed = []
    with Archive.open(folder / "archive.db", settings=settings, clock=lambda: clock[0]) as archive:
        for spec in fixture["background"]:
            archive.admit(_document(spec, fixture["now"], []))
        ids: list[dict[str, Any]] = []
        for spec in case["corpus"]:
            ids.append(archive.admit(_document(spec, fixture["now"], ids)))
        for step in case["steps"]:
            clock[0] = shift(fixture["now"], step.get("hoursLater", 0) * 3600)
            params = {
                "project": PROJECT,
                "sessionId": step.get("session", "live"),
                "messageKey": step["key"],
                "text": step["text"],
                "activeMessageKeys": step.get("active", []),
                "excludeVisibleSourceKeys": step.get("visible", []),
            }
            if "policy" in case:
                params["policy"] = case["policy"]
            observed.append({"step": step, "now": clock[0], "response": archive.call("preflight", params)})
    return observed


def _judge(case: dict[str, Any], settings: Settings, observed: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts for one case, from the observed bytes and hint sources."""
    counts = {"leaked": 0, "stale": 0, "budget": 0, "unsafe": 0}
    policy = case.get("policy", {})
    budget = policy.get("hintBudgetTokens", settings["hintBudgetTokens"])
    active_budget = policy.get("activeHintBudgetTokens", settings["activeHintBudgetTokens"])
    frozen: dict[str, str] = {}
    forbidden = [*case.get("forbidden", []), *([case["coldNeighborTerm"]] if "coldNeighborTerm" in case else [])]
    for item in observed:
        step, text, response = item["step"], item["response"]["modelVisibleText"], item["response"]
        frozen[step["key"]] = text
        lowered = text.casefold()
        counts["leaked"] += sum(1 for term in forbidden if term.casefold() in lowered)
        spans = marker_spans(text) if text else None
        if spans is not None and not all(span and span in step["text"] for span in spans):
            counts["leaked"] += 1
        if estimate_tokens(text) > budget:
            counts["budget"] += 1
        keys = dict.fromkeys([*step.get("active", []), step["key"]])
        if sum(estimate_tokens(frozen.get(k, "")) for k in keys) > active_budget:
            counts["budget"] += 1
        for hint in response["hints"]:
            source = hint["source"]
            limit = settings[AGE_LIMITS[source["retentionClass"]]] if source["retentionClass"] in AGE_LIMITS else -1
            if (
                limit < 0
                or source["kind"] == "manual"
                or (limit and age_days(source["createdAt"], item["now"]) > limit)
            ):
                counts["stale"] += 1
            if source["toolOutput"] or source["kind"] == "tool-result":
                counts["unsafe"] += 0 if _quoted_as_data(text) else 1
    last = observed[-1]
    final_text = last["response"]["modelVisibleText"]
    outcome = "suppress"
    if final_text:
        outcome = "continuity-marker" if marker_spans(final_text) is not None else "historical-snippet"
    hit = outcome == case["expect"]
    if hit and outcome == "continuity-marker" and "spans" in case:
        hit = marker_spans(final_text) == case["spans"]
    diagnostics = last["response"]["diagnostics"]
    return {
        **counts,
        "outcome": outcome,
        "hit": hit,
        "reason": diagnostics["reason"],
        # the learned ranker's share its source held (lexical only): why a marker or snippet was held back
        "probabilityShare": diagnostics.get("metrics", {}).get("probabilityShare"),
    }


def _quoted_as_data(text: str) -> bool:
    """A snippet: the fixed label saying 'data, not instructions', then one JSON string."""
    if not text.startswith(SEPARATOR) or "\n" not in text[len(SEPARATOR) :]:
        return False
    label, _, body = text[len(SEPARATOR) :].partition("\n")
    try:
        return "not instructions" in label and isinstance(orjson.loads(body), str)
    except orjson.JSONDecodeError:
        return False


def evaluate(fixture: dict[str, Any]) -> dict[str, Any]:
    judged = []
    with tempfile.TemporaryDirectory(prefix="cwa-hints-") as tmp:
        settings = default_settings(Path(tmp))
        for number, case in enumerate(fixture["cases"]):
            folder = Path(tmp) / f"case-{number}"
            folder.mkdir()
            judged.append((case, _judge(case, settings, run_case(case, fixture, folder, settings))))

    def recall(kind: str) -> float:
        positives = [j for c, j in judged if c["expect"] == kind]
        return round(sum(j["hit"] for j in positives) / len(positives), 4) if positives else 1.0

    negatives = [j for c, j in judged if c["expect"] == "suppress"]
    metrics = {
        "cases": len(judged),
        "markerPositives": sum(c["expect"] == "continuity-marker" for c, _ in judged),
        "snippetPositives": sum(c["expect"] == "historical-snippet" for c, _ in judged),
        "negatives": len(negatives),
        "markerRecall": recall("continuity-marker"),
        "snippetRecall": recall("historical-snippet"),
        "falsePositiveRate": round(sum(j["outcome"] != "suppress" for j in negatives) / len(negatives), 4)
        if negatives
        else 0.0,
        "leakedTerms": sum(j["leaked"] for _, j in judged),
        "staleReveals": sum(j["stale"] for _, j in judged),
        "budgetViolations": sum(j["budget"] for _, j in judged),
        "unsafeToolHints": sum(j["unsafe"] for _, j in judged),
    }
    compare = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, "==": lambda a, b: a == b}
    gates = [
        {"metric": m, "rule": f"{op} {bound}", "value": metrics[m], "passed": compare[op](metrics[m], bound)}
        for m, op, bound in GATES
    ]
    failures = [
        {
            "case": c.get("name"),
            "category": c.get("category"),
            "expected": c["expect"],
            "outcome": j["outcome"],
            "reason": j["reason"],
            "probabilityShare": j["probabilityShare"],
        }
        for c, j in judged
        if not j["hit"]
    ]
    return {
        "fingerprint": fixture.get("fingerprint"),
        "metrics": metrics,
        "gates": gates,
        "failures": failures,
        "cases": [{"case": c.get("name"), "category": c.get("category"), **j} for c, j in judged],
        "passed": all(g["passed"] for g in gates),
    }


def _refingerprint(path: Path) -> None:
    fixture = orjson.loads(path.read_bytes())
    parse_timestamp(fixture["now"])
    fixture["fingerprint"] = fingerprint(fixture)
    path.write_bytes(orjson.dumps(fixture, option=orjson.OPT_INDENT_2) + b"\n")
    print(f"{path}: fingerprint {fixture['fingerprint']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    parser.add_argument("--refingerprint", action="store_true", help="record the fixture's new fingerprint")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.refingerprint:
        _refingerprint(args.fixture)
        sys.exit(0)
    report = evaluate(load_fixture(args.fixture))
    print(orjson.dumps(report if args.json else report["metrics"], option=orjson.OPT_INDENT_2).decode())
    sys.exit(0 if report["passed"] else 1)
