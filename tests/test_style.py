"""What ruff does not check and review found: an `a if c else b()` or `c and f()` written as a
statement (an `if` in disguise)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO


def disguised_ifs(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Expr) and isinstance(node.value, (ast.IfExp, ast.BoolOp)):
                found.append(f"{path.relative_to(path.parents[1]).as_posix()}:{node.lineno}: {ast.unparse(node)[:80]}")
    return found


def test_no_expression_statement_stands_for_an_if():
    paths = sorted([*(REPO / "cwa").rglob("*.py"), *(REPO / "eval").rglob("*.py")])
    assert disguised_ifs(paths) == []


def test_the_check_finds_one(tmp_path):
    (tmp_path / "pkg").mkdir()
    module = tmp_path / "pkg" / "m.py"
    module.write_text("def f(a):\n    print(1) if a else print(2)\n    a and print(3)\n    x = 1 if a else 2\n")
    assert disguised_ifs([module]) == [
        "pkg/m.py:2: print(1) if a else print(2)",
        "pkg/m.py:3: a and print(3)",
    ]
