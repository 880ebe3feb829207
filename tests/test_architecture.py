"""The house rules of ``src/subaudit``, read from the code: one concept per module (none over
700 lines), imports that run one way between the packages, no private names across modules,
and a docstring on every package that says what it owns and what it may import."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "subaudit"
#: What each part of the package may import of subaudit (besides itself and the base).
BASE = {"validation", "seeding", "schedule", "artifacts", "devices", "job_requests"}
MAY_IMPORT = {
    "accounting": set(),
    "estimation": {"accounting"},
    "engine": set(),
    "data": set(),
    "scenarios": {"engine", "estimation", "accounting", "data"},
    "reporting": {"scenarios", "estimation", "accounting"},
    "integrations": {"scenarios", "estimation", "accounting", "data"},
    "opacus": {"integrations"},
    "pipeline": {"scenarios", "engine", "estimation", "accounting", "data", "reporting"},
    "cli": {"pipeline", "reporting", "scenarios", "engine", "estimation", "accounting", "data", "integrations"},
}
LIMIT = 700


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if not p.name == "ziggurat_tables.py")


def _part(path: Path) -> str:
    rel = path.relative_to(SRC).parts
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """Every import of subaudit in a file, lazy and TYPE_CHECKING ones included: (module,
    imported names, line)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "subaudit" or node.module.startswith("subaudit."):
                out.append((node.module, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names if a.name.startswith("subaudit")]
    return out


def _target(module: str, names: list[str]) -> set[str]:
    """The top-level parts an import reaches (``from subaudit import x``: each x)."""
    parts = module.split(".")
    if len(parts) == 1:
        return {n for n in names if not n.startswith("__")}
    return {parts[1]}


def test_no_module_is_over_the_limit():
    long = {str(p.relative_to(ROOT)): n for p in _modules() if (n := len(p.read_text().splitlines())) > LIMIT}
    assert not long, f"modules over {LIMIT} lines: {long}"


def test_imports_run_one_way():
    bad = []
    for path in _modules():
        part = _part(path)
        allowed = BASE | {part} | MAY_IMPORT.get(part, set())
        if part in BASE:
            allowed = BASE
        for module, names, line in _imports(path):
            for target in _target(module, names) - allowed:
                bad.append(f"{path.relative_to(ROOT)}:{line} ({part}) imports {target}")
    assert not bad, "\n".join(bad)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the subaudit modules it imports (lazy and TYPE_CHECKING imports included:
    ``from package import name`` reaches the submodule ``name`` where there is one, else the
    package)."""
    modules = {_module_name(p): p for p in _modules()}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        reached = set()
        for module, names, _ in _imports(path):
            for n in names or [None]:
                sub = f"{module}.{n}"
                reached.add(sub if n and sub in modules else module)
        graph[name] = {m for m in reached if m in modules and m != name}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while part[-1:] != [v]:
                part.append(stack.pop())
            if len(part) > 1:
                circles.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_no_import_circle():
    """No two modules import each other, directly or round a longer loop (an import inside a
    function or under TYPE_CHECKING counts: the modules still change together)."""
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = import_graph()
    assert "subaudit.engine.scores" in graph["subaudit.engine.canaries"]
    assert "subaudit.scenarios.s2" in graph["subaudit.scenarios"]
    assert import_circles(graph) == []


def test_no_two_modules_or_public_classes_share_a_name():
    """A name says which module or class is meant: none twice in the package (the public face
    ``subaudit.opacus`` aside, which re-exports ``subaudit.integrations.opacus``)."""
    from collections import defaultdict

    modules, classes = defaultdict(list), defaultdict(list)
    for path in _modules():
        if path.name != "__init__.py" and path != SRC / "opacus.py":
            modules[path.stem].append(str(path.relative_to(SRC)))
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                classes[node.name].append(str(path.relative_to(SRC)))
    assert {k: v for k, v in modules.items() if len(v) > 1} == {}
    assert {k: v for k, v in classes.items() if len(v) > 1} == {}


@pytest.mark.parametrize("folder", ["src", "tests", "workflow", "benchmarks", "examples", "scripts"])
def test_no_file_imports_a_private_name(folder):
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for module, names, line in _imports(path):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private or any(part.startswith("_") for part in module.split(".")[1:]):
                bad.append(f"{path.relative_to(ROOT)}:{line}: from {module} import {names}")
    assert not bad, "\n".join(bad)


def test_no_module_reads_another_modules_private_names():
    """``alias._name`` where ``alias`` is a subaudit module imported by the file."""
    bad = []
    for path in _modules():
        tree = ast.parse(path.read_text())
        aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                aliases |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith("subaudit")}
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("subaudit"):
                aliases |= {a.asname or a.name for a in node.names if a.name[0].islower()}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and node.attr.startswith("_") and not node.attr.startswith("__")):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not bad, "\n".join(bad)


def _module_aliases(tree: ast.AST) -> dict[str, str]:
    """Name -> the subaudit module it stands for, of a file's imports (``import subaudit.x.y as
    a``, ``from subaudit.x import y``)."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.asname: a.name for a in node.names if a.name.startswith("subaudit.") and a.asname}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("subaudit"):
            out |= {a.asname or a.name: f"{node.module}.{a.name}" for a in node.names if a.name[0].islower()}
    return out


def test_a_test_reads_private_names_only_of_the_module_it_tests():
    """``tests/X/test_Y.py`` tests ``subaudit.X.Y`` (``tests/X/test_init.py`` the package
    ``subaudit.X``): it may read that module's private helpers (white-box checks of its
    internals), never another module's, whose internals it does not own."""
    bad = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        rel = path.relative_to(ROOT / "tests")
        stem = rel.stem.removeprefix("test_")
        mine = ".".join(["subaudit", *rel.parts[:-1], *([] if stem == "init" else [stem])])
        tree = ast.parse(path.read_text())
        aliases = _module_aliases(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")
                    and aliases[node.value.id] != mine):
                bad.append(f"tests/{rel}:{node.lineno}: {aliases[node.value.id]}.{node.attr}")
    assert not bad, "\n".join(bad)


def test_every_package_says_what_it_owns_and_may_import():
    for init in sorted(SRC.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc) > 200, f"{init.relative_to(ROOT)}: a docstring saying what the package owns"
        if init.parent != SRC:
            assert "may import" in doc.lower(), f"{init.relative_to(ROOT)}: say what the package may import"


def test_the_workflow_parses_without_torch():
    """What Snakemake imports while it parses (once per cluster job) loads no torch."""
    code = ("import sys\n"
            "import subaudit.pipeline.config, subaudit.pipeline.settings, subaudit.scenarios\n"
            "import subaudit.reporting.figure_registry, subaudit.scenarios.one_run_canaries, subaudit.data\n"
            "import subaudit.estimation, subaudit.schedule\n"
            "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
