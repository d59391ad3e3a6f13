"""Layers point one way: host → api → session → retrieve → index → store → leaf modules.

Every import of every module (module-level or inside a function, read with `ast`) may name a
module of its own layer or of a lower one, never a higher one, and no chain of imports may lead
back to where it started. A name a lower layer needs lives in the lower layer.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

from cwa import routing

# Lowest first. A package name covers every module under it. The evaluation package (eval/, installed
# as cwa_eval) sits above every host: it may use all of cwa, and nothing in cwa/ may import it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "leaf",
        (
            "cwa",
            "cwa.config",
            "cwa.errors",
            "cwa.limits",
            "cwa.tokens",
            "cwa.timestamps",
            "cwa.vocabulary",
            "cwa.identifiers",
            "cwa.json_input",
            "cwa.models",
            "cwa.model_variants",
            "cwa.model_install",
            "cwa.input_files",
            "cwa.file_writes",
            "cwa.hook_failures",
            "cwa.archive_path",
            "cwa.child_process",
            "cwa.protocol_output",
        ),
    ),
    ("store", ("cwa.store",)),
    ("index", ("cwa.index",)),
    ("retrieve", ("cwa.retrieve",)),
    ("session", ("cwa.session",)),
    ("api", ("cwa.api", "cwa.contract", "cwa.routing", "cwa.agent_tools")),
    (
        "host",
        (
            "cwa.cli",
            "cwa.serve",
            "cwa.integrations",
            "cwa.evidence",
            "cwa.mcp_server",
            "cwa.browse",
            "cwa.demo",
            "cwa.__main__",
            "cwa.hint_gates",
            "cwa.capture",
            "cwa.hook_client",
            "cwa.call",
            "cwa.exits",
            "cwa.launch",
        ),
    ),
    ("eval", ("cwa_eval",)),
)
SOURCES = (
    ("cwa", REPO / "cwa"),
    ("cwa_eval", REPO / "eval"),
)


def module_files(sources) -> dict[str, Path]:
    found = {}
    for package, folder in sources:
        for path in sorted(folder.rglob("*.py")):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package modules `name` imports anywhere in its file (functions included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else base)
    return {m for m in found if m in modules and m != name}


LAYER_OF = {prefix: rank for rank, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes}


def layer_of(module: str) -> int | None:
    """The layer of the longest listed prefix of `module`; the bare `cwa` prefix covers only the
    package's own `__init__`, so a new top-level module must be placed by hand."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix == "cwa" and end < len(parts):
            continue
        if (rank := LAYER_OF.get(prefix)) is not None:
            return rank
    return None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of more than one module, as one closed import chain."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_chain(graph, group) for group in groups]


def _chain(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest import chain from the group's first module back to itself."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & group):
                if target == start:
                    return paths[node] + [start]
                if target not in paths:
                    paths[target] = paths[node] + [target]
                    following.append(target)
        frontier = following
    raise AssertionError("a strongly connected group always has a cycle")


def violations(sources) -> list[str]:
    files = module_files(sources)
    graph = {name: imports_of(name, path, set(files)) for name, path in files.items()}
    problems = [
        f"{name} has no layer: add it to LAYERS in tests/test_layers.py"
        for name in sorted(graph)
        if layer_of(name) is None
    ]
    for name, targets in sorted(graph.items()):
        for target in sorted(targets):
            low, high = layer_of(name), layer_of(target)
            if low is not None and high is not None and high > low:
                problems.append(f"{name} ({LAYERS[low][0]}) imports {target} ({LAYERS[high][0]}): an import up a layer")
    problems += [f"import cycle: {' -> '.join(chain)}" for chain in cycles(graph)]
    return problems


def test_every_import_points_down_a_layer_and_none_forms_a_cycle():
    problems = violations(SOURCES)
    assert not problems, "\n".join(problems)


def test_the_check_names_an_upward_import_a_cycle_and_an_unplaced_module(tmp_path):
    tree = tmp_path / "cwa"
    for folder in ("store", "index", "retrieve"):
        (tree / folder).mkdir(parents=True)
        (tree / folder / "__init__.py").write_text("")
    (tree / "__init__.py").write_text("")
    (tree / "store" / "admission.py").write_text("def admit():\n    from cwa.index.lexical import plan\n")
    (tree / "index" / "lexical.py").write_text("from cwa.store import admission\n")
    (tree / "retrieve" / "search.py").write_text("from cwa.retrieve import semantic\n")
    (tree / "retrieve" / "semantic.py").write_text("def f():\n    from cwa.retrieve.search import x\n")
    (tree / "newthing.py").write_text("")
    (tree / "demo.py").write_text("from cwa_eval.retrieval import locomo\n")
    (tmp_path / "eval" / "retrieval").mkdir(parents=True)
    (tmp_path / "eval" / "retrieval" / "locomo.py").write_text("from cwa.store import admission\n")
    problems = violations((("cwa", tree), ("cwa_eval", tmp_path / "eval")))
    assert "cwa.store.admission (store) imports cwa.index.lexical (index): an import up a layer" in problems
    assert "import cycle: cwa.retrieve.search -> cwa.retrieve.semantic -> cwa.retrieve.search" in problems
    assert "import cycle: cwa.index.lexical -> cwa.store.admission -> cwa.index.lexical" in problems
    assert "cwa.newthing has no layer: add it to LAYERS in tests/test_layers.py" in problems
    assert "cwa.demo (host) imports cwa_eval.retrieval.locomo (eval): an import up a layer" in problems
    assert len(problems) == 5


TOOL_MODULE = "cwa/agent_tools.py"


def tool_violations(root: Path, tool_names: list[str]) -> list[str]:
    """Product sources (Python and TypeScript) other than the one tool module that name an agent
    tool in a string: a tool implemented, or half of one, somewhere else. A host registers the
    tools by reading routing.json and forwards each call to the `tool` method, so it names none."""
    problems = []
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.ts")]):
        where = path.relative_to(root.parent).as_posix()
        if where == TOOL_MODULE:
            continue
        text = path.read_text(encoding="utf-8")
        problems += [
            f"{where} names the tool {name}: tools are implemented in {TOOL_MODULE} only"
            for name in tool_names
            if re.search(rf"[\"']{re.escape(name)}[\"']", text)
        ]
    return problems


def test_the_agent_tools_are_implemented_in_one_module():
    problems = tool_violations(REPO / "cwa", routing.tool_names())
    assert not problems, "\n".join(problems)


def test_the_check_names_a_tool_implemented_outside_the_tool_module(tmp_path):
    (tmp_path / "cwa" / "integrations" / "pi").mkdir(parents=True)
    (tmp_path / "cwa" / "agent_tools.py").write_text('TOOLS = {"context_recall": recall}\n')
    (tmp_path / "cwa" / "integrations" / "pi" / "extension.ts").write_text(
        'register("context_recall", async (p) => call("recall", p));\n'
    )
    (tmp_path / "cwa" / "mcp_server.py").write_text('"""Serves `context_recall` over MCP."""\n')
    problems = tool_violations(tmp_path / "cwa", ["context_recall"])
    assert problems == [
        "cwa/integrations/pi/extension.ts names the tool context_recall: tools are implemented in cwa/agent_tools.py only"
    ]


MAX_CLI_MODULE_LINES = 400  # a command group is read in one sitting


def cli_violations(folder: Path) -> list[str]:
    """Modules of the CLI package longer than a command group should be."""
    return [
        f"{path.relative_to(folder.parent).as_posix()} has {lines} lines: split its commands into groups "
        f"(at most {MAX_CLI_MODULE_LINES})"
        for path in sorted(folder.glob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_CLI_MODULE_LINES
    ]


def test_the_cli_is_a_package_of_small_command_groups():
    assert (REPO / "cwa" / "cli" / "__init__.py").is_file() and not (REPO / "cwa" / "cli.py").exists()
    problems = cli_violations(REPO / "cwa" / "cli")
    assert not problems, "\n".join(problems)


def test_the_check_names_a_cli_module_over_the_limit(tmp_path):
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "archive.py").write_text("x = 1\n" * 401)
    (tmp_path / "cli" / "hints.py").write_text("x = 1\n" * 400)
    assert cli_violations(tmp_path / "cli") == [
        "cli/archive.py has 401 lines: split its commands into groups (at most 400)"
    ]
