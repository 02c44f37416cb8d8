"""The shape of the import graph: no circle among lazygraph's modules, and the code outside the package
(benchmarks, jobs, notebooks) reaching it only through ``lazygraph.api``.

Imports are read from the source, not by importing it: every ``import`` counts, at module level, inside
a function or under ``TYPE_CHECKING``, because each is a dependency a reader has to follow. Importing
``a.b.c`` also runs the packages ``a`` and ``a.b``, so those count too, except the importer's own
ancestors (already being loaded when it runs).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "lazygraph"
# What code outside the package may import of it.
PUBLIC = frozenset({"lazygraph.api"})


# ---- reading imports ----------------------------------------------------------------------------------
def package_modules(root: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """Every module of ``package`` under ``root``: dotted name -> (file, whether it is a package)."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        modules[name] = (path, is_package)
    return modules


def imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """Dotted names ``tree`` imports, absolute; ``from x import y`` yields ``x.y`` (a module or not)."""
    here = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = here.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names if alias.name != "*")


def resolve(name: str, modules: Iterable[str]) -> str | None:
    """The module ``name`` names: itself, or its longest prefix that is a module."""
    known = set(modules)
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the package's modules that importing it loads."""
    modules = package_modules(root, package)
    graph: dict[str, set[str]] = {}
    for module, (path, is_package) in modules.items():
        targets: set[str] = set()
        for name in imported_names(ast.parse(path.read_text()), module, is_package):
            target = resolve(name, modules)
            if target is None:
                continue
            parts = target.split(".")
            for depth in range(1, len(parts) + 1):
                loaded = ".".join(parts[:depth])
                if not (module == loaded or module.startswith(loaded + ".")):
                    targets.add(loaded)
        graph[module] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def source_of(path: Path) -> str:
    """A script's source, or a notebook's code cells (shell and magic lines left out)."""
    if path.suffix != ".ipynb":
        return path.read_text()
    cells = json.loads(path.read_text())["cells"]
    lines = [
        line
        for cell in cells
        if cell["cell_type"] == "code"
        for line in "".join(cell["source"]).splitlines()
        if not line.lstrip().startswith(("!", "%"))
    ]
    return "\n".join(lines)


def internal_imports(path: Path) -> list[str]:
    """The package modules ``path`` imports other than the public ones."""
    tree = ast.parse(source_of(path))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = (
                [f"{node.module}.{alias.name}" for alias in node.names]
                if node.module == PACKAGE
                else [node.module]
            )
        else:
            continue
        bad += [n for n in names if (n == PACKAGE or n.startswith(PACKAGE + ".")) and n not in PUBLIC]
    return bad


def outside_files(root: Path) -> list[Path]:
    return sorted(
        [
            *(root / "benchmarks").rglob("*.py"),
            *(root / "jobs").rglob("*.py"),
            *(root / "notebooks").glob("*.ipynb"),
        ]
    )


# ---- the checks on this repository ----------------------------------------------------------------------
def test_no_circle_among_the_package_modules() -> None:
    found = circles(import_graph(ROOT, PACKAGE))
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_benchmarks_jobs_and_notebooks_use_only_the_public_api() -> None:
    bad = {str(p.relative_to(ROOT)): internal_imports(p) for p in outside_files(ROOT)}
    bad = {path: names for path, names in bad.items() if names}
    assert not bad, "imports of lazygraph internals (use lazygraph.api):\n" + "\n".join(
        f"{path}: {', '.join(sorted(set(names)))}" for path, names in sorted(bad.items())
    )


# ---- the checker itself -----------------------------------------------------------------------------------
def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize(
    "back",
    [
        "from pkg.a import f\n",  # module level
        "def g():\n    from pkg.a import f\n",  # inside a function
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import f\n",
        "from . import a\n",  # relative
    ],
)
def test_a_circle_is_found_however_the_import_is_written(tmp_path: Path, back: str) -> None:
    _write(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/a.py": "from pkg.b import g\ndef f(): ...\n", "pkg/b.py": back},
    )
    assert circles(import_graph(tmp_path, "pkg")) == [["pkg.a", "pkg.b"]]


def test_a_package_that_loads_its_importer_back_is_a_circle(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/sub/__init__.py": "from pkg.sub.c import h\n",
            "pkg/sub/c.py": "from pkg.a import f\ndef h(): ...\n",
            "pkg/a.py": "from pkg.sub.d import k\ndef f(): ...\n",
            "pkg/sub/d.py": "def k(): ...\n",
        },
    )
    assert circles(import_graph(tmp_path, "pkg")) == [["pkg.a", "pkg.sub", "pkg.sub.c"]]


def test_a_package_importing_its_own_modules_is_no_circle(tmp_path: Path) -> None:
    _write(tmp_path, {"pkg/__init__.py": "from pkg.a import f\n", "pkg/a.py": "import os\ndef f(): ...\n"})
    assert circles(import_graph(tmp_path, "pkg")) == []


def test_internal_imports_are_found_in_scripts_and_notebooks(tmp_path: Path) -> None:
    script = tmp_path / "bench.py"
    script.write_text(
        "from lazygraph.api import open_index\nfrom lazygraph import tables\nimport lazygraph.x\n"
    )
    notebook = tmp_path / "n.ipynb"
    cells = [
        {"cell_type": "code", "source": ["%matplotlib inline\n", "from lazygraph.query.engine import E\n"]},
        {"cell_type": "code", "source": ["from lazygraph import api\n"]},
    ]
    notebook.write_text(json.dumps({"cells": cells}))
    assert internal_imports(script) == ["lazygraph.tables", "lazygraph.x"]
    assert internal_imports(notebook) == ["lazygraph.query.engine"]


def test_the_serving_store_does_not_depend_on_the_query_engine() -> None:
    """The query engine may read the serving store; the store, built by index runs, never loads it."""
    graph = import_graph(ROOT, PACKAGE)
    serving = {module: targets for module, targets in graph.items() if module.startswith("lazygraph.serving")}
    bad = {
        module: sorted(t for t in targets if t == "lazygraph.query" or t.startswith("lazygraph.query."))
        for module, targets in serving.items()
    }
    assert not {module: names for module, names in bad.items() if names}
