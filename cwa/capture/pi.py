"""Pi's session files: `~/.pi/agent/sessions/--<cwd>--/<time>_<id>.jsonl` ($PI_CODING_AGENT_DIR
replaces ~/.pi/agent), format version 3 (../shared/PI.md; cwa/session/transcript_file.py reads the
branch Pi sends). An import reads every entry in file order, abandoned branches too, so nothing
said is lost: `message`, `custom_message` and `branch_summary` entries as the engine reads them,
`compaction` entries as their summary. A fork's header names its parent's file.
"""

from __future__ import annotations

from pathlib import Path

from cwa.capture.transcripts import Problem, Transcript, Unit, file_unit, later, read_lines, stamp_of, turn_over
from cwa.session.transcript_file import entry_message, parent_session_id

HOST = "pi"
NO_MESSAGE = frozenset({"model_change", "thinking_level_change", "label", "custom", "session_info"})


def default_root(env: dict[str, str]) -> Path:
    agent = env.get("PI_CODING_AGENT_DIR") or Path(env.get("HOME") or Path.home()) / ".pi" / "agent"
    return Path(agent) / "sessions"


def units(path: Path) -> list[Unit]:
    if path.is_dir():
        return [file_unit(p, read) for p in sorted(path.rglob("*.jsonl"))]
    return [file_unit(path, read)]


def read(path: Path) -> tuple[list[Transcript], list[Problem]]:
    lines = read_lines(path)
    header = next((line for _, line in lines if line.get("type") == "session"), None)
    if header is None:
        return [], [Problem(str(path), lines[0][0] if lines else None, "unknown-type", "no Pi session header")]
    transcript = Transcript(HOST, str(header.get("id") or path.stem), parent_session_id(header), header.get("cwd"))
    problems: list[Problem] = []
    unknown: set[str] = set()
    for number, line in lines:
        kind = line.get("type")
        if kind == "compaction":
            transcript.visible_from = len(transcript.messages)
            summary = {
                "role": "compactionSummary",
                "summary": str(line.get("summary", "")),
                "timestamp": line.get("timestamp"),
            }
            transcript.messages.append(summary)
        elif (message := entry_message(line)) is not None:
            transcript.messages.append(message)
            transcript.updated = later(transcript.updated, stamp_of(message.get("timestamp")))
        elif kind not in NO_MESSAGE and kind not in ("session", "message") and kind not in unknown:
            unknown.add(str(kind))
            problems.append(Problem(str(path), number, "unknown-type", f"entry type {kind!r}"))
    transcript.settled = turn_over(transcript.messages)
    return [transcript], problems
