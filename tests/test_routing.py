"""Evidence routing: the guidance unit, its fingerprint, and the offline evaluation harness
(eval/routing/), without a model."""

from __future__ import annotations

import sys

import pytest
from conftest import REPO

from cwa import routing
from cwa.retrieve.hint_text import render_marker

sys.path.insert(0, str(REPO / "eval" / "routing"))
import harness


def test_the_shipped_guidance_records_its_own_fingerprint() -> None:
    # any edit of the guidance or of the evidence labels must bump `version` and record the new
    # fingerprint in cwa/integrations/routing.json, so results name the guidance they measured
    assert routing.guidance()["fingerprint"] == routing.fingerprint()


def test_the_fingerprint_covers_the_unit_and_the_evidence_labels(monkeypatch) -> None:
    unit = dict(routing.guidance())
    changed = {**unit, "guidelines": [*unit["guidelines"][:-1], unit["guidelines"][-1] + " "]}
    assert routing.fingerprint(changed) != routing.fingerprint()
    monkeypatch.setattr("cwa.retrieve.hint_text.MARKER_TEXT", "[other {spans}]")
    assert routing.fingerprint(unit) != routing.guidance()["fingerprint"]


def test_every_tool_has_a_plain_object_schema_and_words() -> None:
    for tool in routing.guidance()["tools"].values():
        assert tool["parameters"]["type"] == "object" and tool["parameters"]["additionalProperties"] is False
        assert tool["description"] and tool["label"]


def test_cases_come_in_pairs_that_differ_only_by_the_marker() -> None:
    cases = harness.load_cases()
    by_id: dict[str, list[dict]] = {}
    for case in cases:
        by_id.setdefault(case["id"], []).append(case)
    assert len(by_id) >= 12
    for variants in by_id.values():
        assert sorted(bool(v["marker"]) for v in variants) == [False, True]
        with_marker, without = sorted(variants, key=lambda v: not v["marker"])
        assert with_marker["message"] == without["message"]
        shown, plain = harness.render(with_marker), harness.render(without)
        assert shown["system"] == plain["system"]
        assert shown["user"].replace(render_marker(tuple(with_marker["marker"])), "") == plain["user"]
    assert {c["expected"] for c in cases} == set(harness.ROUTES)


def test_the_rendered_prompt_holds_the_guidance_and_the_marker_as_cwa_inserts_it() -> None:
    case = {"id": "x", "marker": ["blue path"], "message": "Switch to the blue path.", "expected": "both"}
    prompt = harness.render(case)
    for line in routing.guidance()["guidelines"]:
        assert line in prompt["system"]
    for name in routing.tool_names():
        assert f"- {name}: " in prompt["system"]
    assert prompt["user"].startswith("Switch to the blue path.\n\n[cwa continuity marker: ")
    assert '"blue path"' in prompt["user"] and prompt["user"].endswith(harness.QUESTION)
    assert "continuity marker" not in harness.render({**case, "marker": None})["user"]


@pytest.mark.parametrize(
    "answer, route",
    [
        ("ROUTE: archive", "archive"),
        ("I think...\nroute: Both\n", "both"),
        ("ROUTE: live\nROUTE: neither", "neither"),
        ("ROUTE: somewhere", None),
        ("the archive, probably", None),
    ],
)
def test_parse_reads_the_last_route_line(answer: str, route: str | None) -> None:
    assert harness.parse(answer) == route


def test_score_counts_accuracy_and_false_archive_searches() -> None:
    cases = [
        {"id": "a", "marker": ["x"], "expected": "archive"},
        {"id": "a", "marker": None, "expected": "live"},
        {"id": "b", "marker": ["y"], "expected": "neither"},
        {"id": "b", "marker": None, "expected": "neither"},
    ]
    answers = ["ROUTE: archive", "ROUTE: both", "ROUTE: archive", "no idea"]
    rows = [harness.result_of(case, answer, "test") for case, answer in zip(cases, answers)]
    scored = harness.score(rows)
    assert scored["accuracy"] == 0.25 and scored["unparsed"] == 1
    assert scored["falseArchiveSearches"] == 2 and scored["falseArchiveRate"] == round(2 / 3, 4)
    assert scored["withMarker"]["accuracy"] == 0.5 and scored["withoutMarker"]["accuracy"] == 0.0
    rows[0]["fingerprint"] = "r1-somethingelse"
    with pytest.raises(harness.StaleResults):
        harness.score(rows)
