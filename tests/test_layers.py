"""The package's layers, declared once: every import points down this list, and no modules import
each other in a cycle — imports inside functions (lazy) and under ``TYPE_CHECKING`` included.

A module belongs to the most specific entry that names it or a package above it (the root package
names only itself, so a new top-level module must be placed).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "hydraulis"
ROOT = "hydraulis"

LAYERS: tuple[tuple[str, ...], ...] = (
    # The base: the concept modules, errors, limits, files; one package, checked for cycles only.
    ("hydraulis", "hydraulis.base"),
    ("hydraulis.data",),
    # What each rank holds (no torch).
    ("hydraulis.sharding",),
    ("hydraulis.cost",),
    ("hydraulis.profiler",),
    ("hydraulis.planner",),
    ("hydraulis.dispatch",),
    ("hydraulis.simulation", "hydraulis.fused"),
    ("hydraulis.job",),
    ("hydraulis.artifacts",),
    # The commands' file work: a profile run, a simulation's inputs, the length report, the stdlib corpus.
    ("hydraulis.io",),
    # Hydraulis' plans inside other runtimes (Megatron-Core, PyTorch): torch-free, reading spaces as artifacts.
    ("hydraulis.integrations",),
    ("hydraulis.runtime",),
    ("hydraulis.service",),
    ("hydraulis.viz",),
    ("hydraulis.cli", "hydraulis.__main__"),
)


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    modules = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules ``name`` imports anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target.startswith("hydraulis"):
                found.add(target)
    found.discard(name)
    return found


def layer_of(name: str, layers: tuple[tuple[str, ...], ...] = LAYERS) -> int:
    """The index of the most specific entry naming ``name`` or a package above it."""
    best = (-1, -1)
    for index, entries in enumerate(layers):
        for entry in entries:
            if name == entry or (entry != ROOT and name.startswith(entry + ".")):
                best = max(best, (entry.count("."), index))
    if best[1] < 0:
        raise AssertionError(f"{name} is in no layer: add it to LAYERS")
    return best[1]


def upward_imports(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    return sorted(f"{source} (layer {layer_of(source, layers)}) imports {target} (layer {layer_of(target, layers)})"
                  for source, targets in graph.items() for target in targets
                  if layer_of(target, layers) > layer_of(source, layers))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
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
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    modules = module_files(root)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_every_import_points_down_the_layers():
    assert upward_imports(import_graph()) == []


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_a_planted_upward_import_is_found(tmp_path):
    cost = tmp_path / "hydraulis" / "cost"
    cost.mkdir(parents=True)
    for init in (tmp_path / "hydraulis" / "__init__.py", cost / "__init__.py"):
        init.write_text("")
    (cost / "memory.py").write_text("def f():\n    from hydraulis.runtime.step import StepRunner\n")
    (tmp_path / "hydraulis" / "runtime").mkdir()
    (tmp_path / "hydraulis" / "runtime" / "__init__.py").write_text("")
    (tmp_path / "hydraulis" / "runtime" / "step.py").write_text("")
    found = upward_imports(import_graph(tmp_path / "hydraulis"))
    cost_layer, runtime_layer = layer_of("hydraulis.cost.memory"), layer_of("hydraulis.runtime.step")
    assert found == [f"hydraulis.cost.memory (layer {cost_layer}) imports hydraulis.runtime.step (layer {runtime_layer})"]


def test_a_planted_cycle_is_found(tmp_path):
    root = tmp_path / "hydraulis"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "scheme.py").write_text("import hydraulis.space\n")
    (root / "space.py").write_text("def f():\n    from hydraulis import scheme\n")
    assert cycles(import_graph(root)) == [["hydraulis.scheme", "hydraulis.space"]]


def test_a_module_outside_the_layers_is_named():
    with pytest.raises(AssertionError, match="hydraulis_extra is in no layer"):
        layer_of("hydraulis_extra")
    with pytest.raises(AssertionError, match="hydraulis.extra is in no layer"):
        layer_of("hydraulis.extra")


def test_the_pure_core_does_not_even_name_the_runtime():
    """The cost model, planner, dispatch and profiler refer to the runtime in words, never by
    module path, so that nothing there invites an import of it."""
    places = [*(PACKAGE / name for name in ("cost", "planner", "dispatch", "profiler")),
              *(PACKAGE / "base" / f"{name}.py" for name in ("segments", "space", "types"))]
    files = [p for place in places for p in ([place] if place.is_file() else sorted(place.rglob("*.py")))]
    assert [str(p) for p in files if re.search(r"hydraulis.runtime", p.read_text())] == []
