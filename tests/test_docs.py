"""The documentation describes what exists: every `cwa …` command the README and docs/ show is a
real command, every setting is documented with its default (and nothing documented is missing from
cwa/config.py), and every method of the contract has its section."""

from __future__ import annotations

import re

import click
from conftest import REPO

from cwa.api import METHODS
from cwa.cli import main
from cwa.config import SETTINGS, env_name

DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"```(?:sh|bash|console)?\n(.*?)```", re.DOTALL)


def shown_commands() -> list[tuple[str, list[str]]]:
    """(document, words) of every `cwa …` line in a shell block of the README and docs/."""
    found = []
    for document in DOCUMENTS:
        for block in FENCE.findall(document.read_text(encoding="utf-8")):
            for line in block.splitlines():
                line = line.strip()
                line = line.split(" #")[0].strip()  # a trailing comment is not part of the command
                if line.startswith(("cwa ", ".venv/bin/cwa ")) or line == "cwa":
                    found.append((document.name, line.split()[1:]))
    return found


def resolve(words: list[str]) -> tuple[click.Command | None, str | None]:
    """The command `words` name, and the word after it (an option, an argument or nothing)."""
    command: click.Command = main
    for word in words:
        if word.startswith("-") or not isinstance(command, click.Group):
            return command, word
        context = click.Context(command)
        if word not in command.list_commands(context):  # with those registered through entry points
            return (None if command is main else command), word
        command = command.get_command(context, word)
    return command, None


def test_every_command_the_docs_show_exists():
    shown = shown_commands()
    assert len(shown) >= 40
    wrong = []
    for doc, words in shown:
        command, after = resolve(words)
        if command is None:
            wrong.append(f"{doc}: cwa {' '.join(words)}: no such command")
        elif isinstance(command, click.Group):
            # a group shown alone must run without a subcommand; a word after it must be one
            if after is None and not command.invoke_without_command:
                wrong.append(f"{doc}: cwa {' '.join(words)}: needs a subcommand")
            elif after is not None and not after.startswith("-") and not command.invoke_without_command:
                wrong.append(f"{doc}: cwa {' '.join(words)}: {after} is not a subcommand")
    assert wrong == []


def test_every_setting_is_documented_with_its_default_and_nothing_more():
    text = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([a-zA-Z]+)` \| ([^|]+) \|", text, re.MULTILINE))
    environment = dict(re.findall(r"^\| `([a-zA-Z]+)` \|[^|]+\|[^|]+\| `(CWA_[A-Z_]+)` \|", text, re.MULTILINE))
    assert all(environment.get(s.key) == env_name(s.key) for s in SETTINGS), "each key's environment name"
    keys = {s.key for s in SETTINGS}
    assert keys <= set(rows), f"undocumented settings: {sorted(keys - set(rows))}"
    documented_settings = {k for k in rows if k[0].islower() and k not in ("environment", "project", "default")}
    unknown = documented_settings - keys - {s.alias for s in SETTINGS if s.alias}
    assert unknown == set(), f"documented settings that do not exist: {sorted(unknown)}"
    for setting in SETTINGS:
        shown = rows[setting.key].strip().replace(",", "").strip("`")
        default = setting.default
        expected = (
            {True: "true", False: "false"}.get(default, str(default))
            if isinstance(default, bool) or not isinstance(default, list)
            else None
        )
        if expected is not None and not isinstance(default, float):
            assert shown == expected or shown.startswith(expected), (setting.key, shown, default)
        elif isinstance(default, float):
            assert float(shown) == default, (setting.key, shown, default)


def test_every_method_has_its_section_in_the_contract():
    text = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")
    headed = set(re.findall(r"^## `([a-z-]+)`(?:, `([a-z-]+)`)?", text, re.MULTILINE))
    sections = {name for pair in headed for name in pair if name}
    assert set(METHODS) - sections == set(), f"methods without a section: {sorted(set(METHODS) - sections)}"


def test_every_field_of_every_method_is_named_in_its_section():
    text = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")
    sections: dict[str, str] = {}
    for part in re.split(r"^## ", text, flags=re.MULTILINE):
        for name in re.findall(r"`([a-z-]+)`", part.split("\n", 1)[0]):
            sections[name] = part
    missing = [
        f"{name}.{field}"
        for name, method in METHODS.items()
        for field in method.schema.fields
        if not re.search(rf"(?<![A-Za-z]){re.escape(field)}(?![A-Za-z])", sections.get(name, ""))
    ]
    assert missing == []


def test_every_test_the_docs_name_exists():
    defined = set()
    for path in (REPO / "tests").glob("test_*.py"):
        defined |= set(re.findall(r"^def (test_\w+)", path.read_text(encoding="utf-8"), re.MULTILINE))
        defined.add(path.stem)
    named = []
    for document in DOCUMENTS:
        for name, cut in re.findall(r"\b(test_[a-z0-9_]+)(…)?", document.read_text(encoding="utf-8")):
            named.append((document.name, name, bool(cut)))
    assert len(named) >= 40
    missing = [
        f"{doc}: {name}"
        for doc, name, prefix in named
        if not (any(d.startswith(name) for d in defined) if prefix else name in defined)
    ]
    assert missing == []


def test_every_contract_section_names_what_shows_it():
    text = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    unshown = [s.split("\n", 1)[0] for s in sections if "\nShown by: " not in s]
    assert unshown == []
