"""The README's Quick start: exactly two set-up commands; CI runs the test one verbatim; the demo
works against a fresh archive and is idempotent."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys

import apsw
import pytest
from conftest import REPO, hermetic_env, run_cwa


def _quick_start_commands() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, re.S)]


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_one():
    commands = _quick_start_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    demo, tests = commands
    assert demo.endswith("cwa demo")
    assert "pytest" in tests and "[test]" in tests
    ci_lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci_lines[0] == "#!/usr/bin/env bash"
    assert "set -euo pipefail" in ci_lines
    assert tests in ci_lines


def test_demo_archives_the_sample_session_and_is_idempotent(tmp_path):
    db = tmp_path / "fresh" / "archive.db"
    env = hermetic_env(tmp_path, db)
    first = run_cwa(["demo"], env)
    assert first.returncode == 0, first.stderr
    output = first.stdout.decode()
    assert str(db) in output
    assert output.count("(new)") == 4
    assert "src/retry.py:42" in output and "ERR_LOCK_TIMEOUT" in output  # paths and an error

    # the next day's preflight: a marker, a snippet, and a current-state question left alone
    assert "[continuity-marker: implicit-concept-continuity]" in output
    assert 'also mentioned "acquire_lock"' in output
    assert "[historical-snippet: explicit-history-strong-evidence]" in output
    assert "[suppress: current-state-required]" in output

    second = run_cwa(["demo"], env)
    assert second.stdout.decode().count("(already archived)") == 4
    hints = lambda text: text[text.index("The next day") : text.index("Look inside")]  # noqa: E731
    assert hints(second.stdout.decode()) == hints(output)  # frozen: replayed byte for byte

    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    kinds = sorted(k for (k,) in conn.execute("SELECT kind FROM live_documents"))
    assert kinds == ["decision", "tool-result", "turn", "turn"]
    roles = {r for (r,) in conn.execute("SELECT role FROM document_messages")}
    assert roles == {"user", "assistant", "toolResult", "custom"}


def test_every_package_folder_is_listed_for_the_wheel():
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {".".join(path.parent.relative_to(REPO).parts) for path in (REPO / "cwa").rglob("__init__.py")}
    assert folders <= listed, f"add {sorted(folders - listed)} to [tool.setuptools] packages"


LOCATOR = re.compile(r"cwa1\.[\w-]+\.[\w-]+")


@pytest.mark.parametrize("archive_from", ["environment", "--db"])
def test_every_command_the_demo_prints_works_when_typed(tmp_path, archive_from):
    """A new user copies each command the demo shows into a terminal, in another folder: each one
    works and, for searches and the recall, prints what the demo showed (locators aside: a typed
    search takes a lease, the demo's searches take none)."""
    db = tmp_path / "data" / "archive.db"
    env = hermetic_env(tmp_path, db if archive_from == "environment" else None)
    elsewhere = tmp_path / "some-other-folder"
    elsewhere.mkdir()
    first = run_cwa(["demo"] if archive_from == "environment" else ["--db", str(db), "demo"], env, cwd=elsewhere)
    assert first.returncode == 0, first.stderr
    shown = first.stdout.decode()

    program = f"{shlex.quote(sys.executable)} -m cwa"  # how the demo was run, so how its commands start

    def typed(command: str):
        assert command.startswith(program + " ")
        done = subprocess.run(shlex.split(command), capture_output=True, env=env, cwd=elsewhere, timeout=120)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        return done.stdout.decode().rstrip("\n")

    chunks = [program + " " + chunk for chunk in shown.split(f"\n$ {program} ")[1:]]
    assert len(chunks) == 4  # two searches, the latest correction, the recall
    for chunk in chunks:
        command, _, block = chunk.partition("\n")
        block = block.split("\n\nThe next day")[0].rstrip("\n")
        assert (archive_from == "--db") == (f"--db {db}" in command)
        assert LOCATOR.sub("LOCATOR", typed(command)) == LOCATOR.sub("LOCATOR", block), command
        assert "no results" not in block

    whys = re.findall(r"\[([a-z-]+): ([a-z-]+)\]\n(?:  .*\n)*?  \(why: (.*)\)", shown)
    assert len(whys) == 3
    for outcome, reason, command in whys:
        assert f": {outcome} ({reason})" in typed(command)

    continuations = re.findall(r"\(continues \w+: (.*)\)", shown)
    assert continuations
    for command in continuations:
        assert "\nbytes " in typed(command)  # a resolved recall: its byte range, then the text

    sql = shown.split("Look inside with SQL:\n  ", 1)[1].strip()
    if shutil.which("sqlite3"):
        listed = subprocess.run(shlex.split(sql), capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 4, listed.stderr
