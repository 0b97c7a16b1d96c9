"""The project's modules import one another without ever going round in a circle.

The graph is read from the source with `ast`, not by importing: an import inside a function
counts as much as one at the top, because it is the same dependency, only hidden.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("hosts", "jobs", "notifications", "schedsite", "runner")

# Edges (importer, imported) taken out of the graph while another change moves the file that
# holds them. Keep it empty: an entry is a cycle we know of and have not yet removed.
IN_FLIGHT: frozenset[tuple[str, str]] = frozenset()


def module_files() -> dict[str, Path]:
    """Map every module of the project's packages to its file."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def imported_names(module: str, path: Path) -> Iterator[str]:
    """Yield the dotted names a module imports, anywhere in it, relative ones made absolute."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")
                if not is_package:
                    package = package[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            # `from pkg import name` stands for the module pkg.name when there is one, and
            # for pkg otherwise (project_target walks up).
            yield from (f"{base}.{alias.name}" for alias in node.names)


def project_target(name: str, modules: dict[str, Path]) -> str | None:
    """The project module a dotted name lives in, or None for the outside world."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph() -> dict[str, set[str]]:
    """Map each project module to the project modules it imports."""
    modules = module_files()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = {project_target(name, modules) for name in imported_names(module, path)}
        graph[module] = {
            target
            for target in targets
            if target is not None and target != module and (module, target) not in IN_FLIGHT
        }
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """Return one cycle as a closed path of modules, or None when the graph has none."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        # An explicit stack, so a deep chain of imports cannot hit the recursion limit.
        path: list[str] = [start]
        on_path = {start}
        stack = [iter(sorted(graph[start]))]
        while stack:
            target = next(stack[-1], None)
            if target is None:
                stack.pop()
                done.add(path[-1])
                on_path.discard(path.pop())
            elif target in on_path:
                return [*path[path.index(target) :], target]
            elif target not in done:
                path.append(target)
                on_path.add(target)
                stack.append(iter(sorted(graph.get(target, ()))))
    return None


def test_the_project_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


def test_the_planner_imports_nothing_from_django():
    modules = module_files()
    planner = {m for m in modules if m.startswith("jobs.scheduling.planner")}
    assert planner, "the planner moved: point this test at it"
    graph = import_graph()
    # The planner's own imports and everything they import in turn.
    reached, todo = set(), list(planner)
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(graph[module])
    outside = {
        name.split(".")[0]
        for module in reached
        for name in imported_names(module, modules[module])
        if project_target(name, modules) is None
    }
    assert not outside & {"django", "rest_framework", "django_q", "django_filters"}, reached


def test_the_cycle_finder_names_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_relative_and_from_imports_resolve_to_project_modules(tmp_path):
    source = tmp_path / "services.py"
    source.write_text(
        "from . import models, helper\nfrom .choices import Kind\n"
        "def f():\n    from jobs.tasks import request_tick\n"
    )
    modules = {"jobs": source, "jobs.models": source, "jobs.choices": source, "jobs.tasks": source}
    targets = {project_target(n, modules) for n in imported_names("jobs.services", source)}
    assert targets == {"jobs", "jobs.models", "jobs.choices", "jobs.tasks"}
