"""The token limits of one epoch, from the model's window and the session settings.

usable input = contextWindow − reserve, where reserve is the request's `reserveTokens`, else the
model's `maxTokens`; with no known window, DEFAULT_USABLE_TOKENS of a DEFAULT_CONTEXT_WINDOW.
The rotation target is `rotationContextRatio` of the usable input; tool results admitted inline
into an epoch may use `toolResultBudgetRatio` of the target before smaller ones are externalized.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cwa.config import Settings

DEFAULT_CONTEXT_WINDOW = 128_000
DEFAULT_USABLE_TOKENS = 96_000
MIN_USABLE_SHARE = 0.25  # a reserve never leaves less than this share of the window
NEAR_LIMIT = 0.8

SESSION_KEYS = (
    "rotationContextRatio",
    "rotationTurns",
    "retainTurns",
    "maxToolResultTokens",
    "toolResultBudgetRatio",
    "toolResultBudgetFloorTokens",
    "dedupToolResults",
    "maxInlineUserTokens",
)


@dataclass(frozen=True)
class Budget:
    context_window: int
    usable: int
    target: int  # rotation threshold in tokens
    rotation_turns: int
    retain_turns: int
    max_tool_tokens: int
    tool_budget: int  # inline tool-result tokens an epoch admits before the floor applies
    tool_floor: int
    dedup: bool
    max_inline_user: int

    @classmethod
    def of(cls, model: dict[str, Any], reserve: int | None, settings: Settings, overrides: dict[str, Any]) -> Budget:
        value = {key: overrides.get(key, settings[key]) for key in SESSION_KEYS}
        window = model.get("contextWindow")
        if window:
            reserve = reserve if reserve is not None else model.get("maxTokens") or 0
            usable = max(window - reserve, int(window * MIN_USABLE_SHARE))
        else:
            window, usable = DEFAULT_CONTEXT_WINDOW, DEFAULT_USABLE_TOKENS
        target = max(1, int(usable * value["rotationContextRatio"]))
        return cls(
            context_window=window,
            usable=usable,
            target=target,
            rotation_turns=value["rotationTurns"],
            retain_turns=value["retainTurns"],
            max_tool_tokens=value["maxToolResultTokens"],
            tool_budget=int(target * value["toolResultBudgetRatio"]),
            tool_floor=value["toolResultBudgetFloorTokens"],
            dedup=value["dedupToolResults"],
            max_inline_user=value["maxInlineUserTokens"],
        )

    def limits(self) -> dict[str, int]:
        return {
            "contextWindow": self.context_window,
            "usableTokens": self.usable,
            "rotationTokens": self.target,
            "rotationTurns": self.rotation_turns,
            "toolResultBudgetTokens": self.tool_budget,
        }


def level(tokens: int, turns: int, budget: Budget) -> str:
    """`ok`, `near-limit` (80% of a rotation threshold) or `at-limit`."""
    fill = max(tokens / budget.target, turns / budget.rotation_turns)
    return "at-limit" if fill >= 1 else "near-limit" if fill >= NEAR_LIMIT else "ok"
