"""`cwa import` throughput: megabytes of client transcript archived per minute.

    python eval/perf/imports.py [--megabytes 40] [--json]

Writes a Claude Code store and a Codex store of coding sessions (tests' fixture layouts: a prompt,
a shell call with 1-12 KB of output, an answer per turn; 200 turns a session) of about the given
size each, then times a first `cwa import` of each into a new archive (its own process, as a user
runs it, in the temporary folder: the cwa measured is the one PYTHONPATH or the installed package
names, never a checkout's the command was started in) and a second run, which must find
everything unchanged. Figures: MB of transcript read per minute of wall time, turn documents
archived per second, the seconds of indexing at the import's end among them, and exact-anchor
rows per turn document (the tool output names a file and line on each line).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from capture_fixtures import ClaudeSession, CodexRollout

from cwa.store import anchor_lists
from cwa_eval.retrieval.sessions import lint_turn

TURNS = 200


def write_stores(root: Path, megabytes: float) -> dict[str, Path]:
    rng = random.Random(7)
    home, project = root / "home", root / "project"
    project.mkdir(parents=True)
    claude_size = codex_size = 0
    session = 0
    while claude_size < megabytes * 1e6:
        transcript = ClaudeSession(home, project, f"{session:08d}-bench")
        for number in range(TURNS):
            transcript.write(*transcript.turn(*lint_turn(rng, number)))
        claude_size += transcript.path.stat().st_size
        session += 1
    while codex_size < megabytes * 1e6:
        rollout = CodexRollout(home / ".codex", project, f"0199{session:08d}-bench")
        for number in range(TURNS):
            rollout.write(*rollout.turn(*lint_turn(rng, number)))
        codex_size += rollout.path.stat().st_size
        session += 1
    return {"home": home, "claude": home / ".claude" / "projects", "codex": home / ".codex"}


def _import(host: str, path: Path, db: Path) -> tuple[float, dict]:
    env = {**os.environ, "CWA_DISK_CRITICAL_MEBIBYTES": "0"}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "cwa", "--db", str(db), "import", host, str(path), "--json"],
        capture_output=True,
        env=env,
        check=True,
        cwd=db.parent,  # `-m` puts the working directory first: a checkout's own cwa would shadow PYTHONPATH's
    )
    return time.perf_counter() - start, json.loads(done.stdout)


def _anchor_rows(db: Path) -> int:
    """The (document, text) anchors the archive lists (one packed list a document: migration 0042)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return sum(len(anchor_lists.unpack(packed)) for (packed,) in conn.execute("SELECT packed FROM anchors"))


def run(megabytes: float) -> dict:
    result = {}
    with tempfile.TemporaryDirectory() as folder:
        stores = write_stores(Path(folder), megabytes)
        for host in ("claude", "codex"):
            db = Path(folder) / f"{host}.db"
            seconds, summary = _import(host, stores[host], db)
            again_seconds, again = _import(host, stores[host], db)
            assert again["documents"] == 0 and again["unchanged"] == summary["sources"]
            result[host] = {
                "megabytes": round(summary["bytes"] / 1e6, 1),
                "sessions": summary["sessions"],
                "documents": summary["documents"],
                "seconds": round(seconds, 1),
                "mb_per_minute": round(summary["bytes"] / 1e6 / seconds * 60, 1),
                "documents_per_second": round(summary["documents"] / seconds, 1),
                "index_seconds": summary.get("indexSeconds"),  # of `seconds`, indexing what it queued
                "rerun_seconds": round(again_seconds, 2),
                "anchor_rows_per_document": round(_anchor_rows(db) / max(1, summary["documents"]), 1),
            }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=40)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.megabytes)
    if args.json:
        print(json.dumps(result))
        return
    for host, figures in result.items():
        print(
            f"{host:<7} {figures['megabytes']} MB, {figures['sessions']} sessions: {figures['seconds']} s, "
            f"{figures['mb_per_minute']} MB/min, {figures['documents_per_second']} turn documents/s "
            f"({figures['index_seconds']} s of indexing at the end); "
            f"re-run {figures['rerun_seconds']} s; {figures['anchor_rows_per_document']:.1f} anchor rows a document"
        )


if __name__ == "__main__":
    main()
