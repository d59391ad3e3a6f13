"""The README's Quick start: exactly two set-up commands; CI runs the test one verbatim; the demo
works against a fresh archive and is idempotent."""

from __future__ import annotations

import re

import apsw
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
    assert '[continuity-marker: implicit-concept-continuity]' in output
    assert 'also mentioned "acquire_lock"' in output
    assert '[historical-snippet: explicit-history-strong-evidence]' in output
    assert '[suppress: current-state-required]' in output

    second = run_cwa(["demo"], env)
    assert second.stdout.decode().count("(already archived)") == 4
    hints = lambda text: text[text.index("The next day"):text.index("Look inside")]  # noqa: E731
    assert hints(second.stdout.decode()) == hints(output)  # frozen: replayed byte for byte

    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    kinds = sorted(k for (k,) in conn.execute("SELECT kind FROM live_documents"))
    assert kinds == ["decision", "tool-result", "turn", "turn"]
    roles = {r for (r,) in conn.execute("SELECT role FROM document_messages")}
    assert roles == {"user", "assistant", "toolResult", "custom"}


def test_every_package_folder_is_listed_for_the_wheel():
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {
        ".".join(path.parent.relative_to(REPO).parts)
        for path in (REPO / "cwa").rglob("__init__.py")
    }
    assert folders <= listed, f"add {sorted(folders - listed)} to [tool.setuptools] packages"
