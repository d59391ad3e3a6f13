"""Evidence routing: everything a model is told about when to use the archive, as one versioned
unit with a fingerprint, shared by every agent host (the Pi extension, MCP).

The unit is `cwa/integrations/routing.json` (tool names, labels, descriptions and JSON Schema
parameters, and the routing guidelines) together with the labels the model sees on archived
evidence (`cwa/retrieve/hint_text.py`). The file records the fingerprint of that whole; any edit
must bump `version` and record the new fingerprint (tests/test_routing.py checks it), so an
evaluation result names exactly the guidance it measured.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import blake3
import orjson

from cwa.retrieve import hint_text

GUIDANCE_FILE = "routing.json"


@functools.cache
def guidance() -> dict[str, Any]:
    """The guidance unit as shipped (a fresh copy is the caller's to change)."""
    return orjson.loads(resources.files("cwa.integrations").joinpath(GUIDANCE_FILE).read_bytes())


def evidence_labels() -> dict[str, str]:
    """The fixed texts that frame archived evidence and continuity markers in a prompt."""
    return {"snippet": hint_text.SNIPPET_LABEL, "marker": hint_text.MARKER_TEXT}


def fingerprint(unit: dict[str, Any] | None = None) -> str:
    """`r1-` + 24 hex digits of blake3 over the unit (its recorded fingerprint left out) and the
    evidence labels, in canonical JSON."""
    unit = dict(guidance() if unit is None else unit)
    unit.pop("fingerprint", None)
    canonical = orjson.dumps({"unit": unit, "labels": evidence_labels()}, option=orjson.OPT_SORT_KEYS)
    return "r1-" + blake3.blake3(canonical).hexdigest()[:24]


def guidelines_text() -> str:
    """The routing guidelines as one block for a system prompt."""
    lines = [f"Context archive (cwa, guidance v{guidance()['version']}):"]
    lines += [f"- {line}" for line in guidance()["guidelines"]]
    return "\n".join(lines)


def tool_names(host: str | None = None) -> list[str]:
    """The tools, or those a host offers (a tool without `hosts` is offered by every host)."""
    return [name for name, tool in guidance()["tools"].items() if host is None or host in tool.get("hosts", [host])]
