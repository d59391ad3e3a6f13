"""Near copies of the same tool output are one search result."""

from __future__ import annotations

from cwa.retrieve.near_duplicates import signature, similar

RUN = """$ pytest tests/test_cart.py -q
FAILED tests/test_cart.py::test_rounding - AssertionError: assert {a} == {b}
  File "src/cart/totals.py", line {line}, in total
    return round(sum(item.price for item in items), 2)
collected {n} items; {f} failed, {p} passed in {t}s
the rounding of cart totals uses floats instead of Decimal values"""


def run_output(seed: int) -> str:
    return RUN.format(a=4.19 + seed, b=4.2, line=40 + seed, n=12 + seed, f=1, p=11 + seed, t=0.3 + seed / 10)


def test_runs_of_the_same_output_are_similar_and_other_text_is_not():
    first, second = signature(run_output(0)), signature(run_output(3))
    other = signature(
        "Deploy the billing service to the staging cluster and rotate the webhook secret "
        "after the invoices job finished; the worker queue drained normally."
    )
    assert similar(first, second)
    assert not similar(first, other)
    assert signature("too short") is None


def test_search_shows_one_of_three_near_copies(archive):
    for seed in range(3):
        archive.admit(
            {
                "project": "/p",
                "sessionId": "s",
                "kind": "tool-result",
                "messages": [{"role": "toolResult", "toolName": "bash", "text": run_output(seed)}],
            }
        )
    archive.admit(
        {
            "project": "/p",
            "sessionId": "s",
            "kind": "turn",
            "messages": [
                {"role": "user", "text": "Why does the cart rounding use floats?"},
                {"role": "assistant", "text": "The totals rounding predates Decimal; switch to Decimal."},
            ],
        }
    )
    results = archive.search(
        {"project": "/p", "query": "rounding floats cart totals Decimal", "limit": 3, "semanticPolicy": "never"}
    )["results"]
    copies = [r for r in results if r["kind"] == "tool-result"]
    assert len(copies) == 1
    assert any(r["kind"] == "turn" for r in results)
