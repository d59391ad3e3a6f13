"""Every name an evaluation script takes from cwa exists. The scripts under eval/ run by hand
(their figures are in docs/), not in the test suite, so a rename in cwa can break one silently:
eval/perf/index_worker.py timed `index_queue.run_handlers` for weeks after it had moved."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from conftest import REPO


def _module(name: str) -> object | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def missing_names(path: Path) -> list[str]:
    """`from cwa.x import y` where x has no y, and `m.y` where m is a cwa module without y."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules: dict[str, object] = {}  # local name → the cwa module it is bound to
    missing = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "cwa":
            source = importlib.import_module(node.module)
            for alias in node.names:
                found = getattr(source, alias.name, None) or _module(f"{node.module}.{alias.name}")
                if found is None:
                    missing.append(f"{node.lineno}: {node.module}.{alias.name}")
                elif isinstance(found, type(source)):
                    modules[alias.asname or alias.name] = found
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "cwa" and alias.asname:
                    modules[alias.asname] = importlib.import_module(alias.name)
    for node in ast.walk(tree):
        named = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
        if named and not hasattr(modules[node.value.id], node.attr):
            missing.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return missing


def test_every_name_an_evaluation_script_takes_from_cwa_exists():
    found = {}
    for path in sorted((REPO / "eval").rglob("*.py")):
        names = missing_names(path)
        if names:
            found[path.relative_to(REPO).as_posix()] = names
    assert found == {}


def test_the_check_finds_a_name_that_moved(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(
        "from cwa.store import index_queue\n"
        "from cwa.store.index_queue import index_queued, run_handlers\n"
        "def f():\n"
        "    return index_queue.run_handlers, index_queue.index_queued\n"
    )
    assert missing_names(script) == ["2: cwa.store.index_queue.run_handlers", "4: index_queue.run_handlers"]
