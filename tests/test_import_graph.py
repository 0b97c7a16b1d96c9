"""The project's packages stand in floors, and its modules import downwards only, never in a circle.

The graph is read from the source with `ast`, not by importing: an import inside a function
counts as much as one at the top, because it is the same dependency, only hidden. Importing
`a.b.c` runs `a/__init__.py` and `a/b/__init__.py` first, so those count as imported too.
The last test imports every module first, in an interpreter of its own, to catch what the
source alone cannot show (docs/architecture.md#layers).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("runner", "schedsite", "hosts", "jobs", "notifications", "stats", "web")

# The floors, bottom first: a package imports only packages on a floor below its own, never one
# above and never one beside it. The same table as docs/architecture.md's (a test holds them).
FLOORS: dict[str, int] = {
    "runner": 1,
    "schedsite": 1,
    "hosts": 2,
    "jobs": 3,
    "notifications": 4,
    "stats": 4,
    "web": 5,
}

# Within the apps, the layers, top first: a module imports only modules of its own layer or a
# lower one (in its app or one below it). The first pattern a module matches gives its layer.
APPS = ("hosts", "jobs", "notifications", "stats")
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "interfaces",
        (
            "*.apps",
            "*.admin",
            "*.urls",
            "*.host_urls",
            "*.views",
            "*.views_*",
            "*.api",
            "*.api.*",
            "*.forms",
            "*.templatetags",
            "*.templatetags.*",
            "*.management",
            "*.management.*",
            "*.tasks",
            "*.rows",
            "jobs.badges",
            "*.host_rows",
            "jobs.metrics",
            "jobs.demo",
        ),
    ),
    (
        "services",
        (
            "*.services",
            "*.services.*",
            "jobs.scheduling.tick",
            "jobs.scheduling.expiry",
            "jobs.scheduling.maintenance",
            "jobs.scheduling.leasing",
            "jobs.scheduling.fanout",
            "jobs.scheduling.preemption",
            "jobs.scheduling.reservation_line",
            "jobs.recovery",
            "jobs.provisioning",
            "jobs.limits",
            "jobs.resubmit",
            "jobs.suite_templates",
            "jobs.labfile",
            "jobs.labexport",
            "jobs.host_inventory",
            "jobs.job_specs",
            "jobs.submission_schema",
            # What the tick would do, without doing it: it reads through the tick's own phases.
            "jobs.scheduling.whatif",
            "notifications.events",
            "notifications.delivery",
            "notifications.outbox",
            "stats.rollup",
        ),
    ),
    (
        "transitions and audit",
        (
            "jobs.transitions",
            "jobs.outbox",
            "jobs.signals",
            "jobs.scheduling.triggers",
            "hosts.audit",
            "hosts.signals",
        ),
    ),
    (
        "reads",
        (
            "*.selectors",
            "*.host_selectors",
            "*.template_selectors",
            "*.filtersets",
            "jobs.job_history",
            "jobs.suite_body",
            "jobs.scheduling.snapshot",
            "jobs.scheduling.labstate",
            "jobs.scheduling.provision_cost",
            "jobs.scheduling.queue",
            "hosts.inventory_files",
            "notifications.queue",
            "stats.ranges",
            "stats.history",
        ),
    ),
    # The querysets are the models' managers (models.py imports them): they stand with them.
    (
        "models",
        (
            "*.models",
            "jobs.scheduler_models",
            "*.querysets",
            "*.choices",
            "*.validators",
            "*.migrations",
            "*.migrations.*",
        ),
    ),
    # Plain values and rules on them, no Django: the planner, and what it shares with hosts.
    (
        "pure",
        ("jobs.scheduling.planner", "jobs.scheduling.planner.*", "hosts.capacity", "hosts.rules"),
    ),
    # The packages themselves: their __init__ holds a docstring and imports nothing.
    ("package", APPS + ("jobs.scheduling",)),
]

# Edges (importer, imported) taken out of the graph while another change removes them. Keep it
# short: an entry is a rule we know is broken and have not yet fixed.
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


def parents(module: str) -> set[str]:
    """The packages Python imports before the module: `a` and `a.b` for `a.b.c`."""
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def import_graph() -> dict[str, set[str]]:
    """Map each project module to the project modules importing it runs, parents included.

    A module's own parent packages are left out of what it imports through another module:
    Python is already running them when it gets to the module (an explicit
    `from a.b import name` of a name defined in `a/b/__init__.py` still counts).
    """
    modules = module_files()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets: set[str] = set()
        for name in imported_names(module, path):
            target = project_target(name, modules)
            if target is None or (module, target) in IN_FLIGHT:
                continue
            targets.add(target)
            targets |= {p for p in parents(target) if p in modules} - parents(module)
        targets.discard(module)
        graph[module] = targets
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


def floor_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a package on the importer's floor or above it."""
    return [
        f"{module} → {target}"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if (a := module.split(".")[0]) != (b := target.split(".")[0]) and FLOORS[a] <= FLOORS[b]
    ]


def layer_of(module: str) -> int | None:
    """The app module's layer, 0 the lowest; None outside the apps (the table must name it)."""
    for index, (_name, patterns) in enumerate(LAYERS):
        if any(fnmatchcase(module, pattern) for pattern in patterns):
            return len(LAYERS) - 1 - index
    return None


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import, between the apps' modules, of a module on a higher layer."""
    app = {m for m in graph if m.split(".")[0] in APPS}
    return [
        f"{module} ({LAYERS[-1 - layer_of(module)][0]}) → {target} "
        f"({LAYERS[-1 - layer_of(target)][0]})"
        for module in sorted(app)
        for target in sorted(graph[module] & app)
        if layer_of(module) < layer_of(target)
    ]


def test_the_project_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


def test_no_package_imports_one_on_its_floor_or_above():
    graph = import_graph()
    assert {m.split(".")[0] for m in graph} == set(FLOORS), "a package without a floor"
    assert floor_violations(graph) == []


def test_the_floors_are_those_docs_architecture_md_draws():
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| (\d) \| ([^|]+) \|", text, flags=re.MULTILINE)
    documented = {
        name: int(floor) for floor, names in rows for name in re.findall(r"`(\w+)/`", names)
    }
    assert documented == FLOORS


def test_every_app_module_has_a_layer_and_imports_none_above_it():
    graph = import_graph()
    unplaced = [m for m in graph if m.split(".")[0] in APPS and layer_of(m) is None]
    assert unplaced == [], "add these to LAYERS (and to docs/architecture.md)"
    assert layer_violations(graph) == []


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


def test_importing_a_module_imports_its_parent_packages(tmp_path, monkeypatch):
    # jobs.scheduling.fanout importing jobs.services.submission runs jobs/services/__init__.py,
    # which imports the tick back: the circle the graph missed while it ignored parents.
    files = {
        "jobs/__init__.py": "",
        "jobs/scheduling/__init__.py": "",
        "jobs/scheduling/tick.py": "from jobs.scheduling import fanout\n",
        "jobs/scheduling/fanout.py": "from jobs.services.submission import submit\n",
        "jobs/services/__init__.py": "from jobs.scheduling.tick import tick\n",
        "jobs/services/submission.py": "from jobs.scheduling.planner import plan\n",
        "jobs/scheduling/planner/__init__.py": "from jobs.scheduling.planner.types import X\n",
        "jobs/scheduling/planner/types.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGES", ("jobs",))
    graph = import_graph()
    assert graph["jobs.scheduling.fanout"] == {"jobs.services", "jobs.services.submission"}
    # A module's own parents are running already when it is imported: no edge back to them.
    assert graph["jobs.scheduling.planner.types"] == set()
    assert graph["jobs.services.submission"] == {"jobs.scheduling", "jobs.scheduling.planner"}
    cycle = find_cycle(graph)
    assert cycle is not None and "jobs.services" in cycle and "jobs.scheduling.tick" in cycle


def test_the_floor_and_layer_rules_name_an_upward_import():
    graph = {
        "hosts.views_policies": {"hosts.services"},
        "hosts.services": {"jobs.transitions", "hosts.models"},
        "jobs.selectors": {"jobs.services.staff", "hosts.models"},
        "jobs.services.staff": set(),
        "jobs.transitions": set(),
        "hosts.models": set(),
        "schedsite.links": {"runner.client"},
        "runner.client": set(),
    }
    assert floor_violations(graph) == [
        "hosts.services → jobs.transitions",
        "schedsite.links → runner.client",
    ]
    assert layer_violations(graph) == ["jobs.selectors (reads) → jobs.services.staff (services)"]


# Run in a fresh interpreter: Django set up with every app's ready() a no-op (so that no app
# imports anything on the modules' behalf), then each module imported first in a child of its
# own (os.fork), two at a time. Prints the modules that failed, with the error, as JSON.
FIRST_IMPORTS = r"""
import importlib, json, os, sys, traceback
import django
from django.apps import AppConfig

create = AppConfig.create.__func__

def create_quiet(cls, entry):
    config = create(cls, entry)
    config.ready = lambda: None
    return config

AppConfig.create = classmethod(create_quiet)
django.setup()
failed, running = {}, {}

def reap():
    pid, status = os.wait()
    module, reader = running.pop(pid)
    if status:
        failed[module] = os.read(reader, 1 << 16).decode(errors="replace") or f"status {status}"
    os.close(reader)

for module in json.loads(sys.argv[1]):
    if len(running) >= 2:
        reap()
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        try:
            importlib.import_module(module)
        except BaseException:
            os.write(writer, traceback.format_exc(limit=-3).encode()[-4000:])
            os._exit(1)
        os._exit(0)
    os.close(writer)
    running[pid] = (module, reader)
while running:
    reap()
print(json.dumps(failed))
"""


def first_import_failures(modules: list[str], *path: Path) -> dict[str, str]:
    """Import each module first, in a fresh interpreter; the ones that fail, with the error."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "schedsite.settings",
        "PYTHONPATH": os.pathsep.join(map(str, (ROOT, *path))),
    }
    done = subprocess.run(
        [sys.executable, "-c", FIRST_IMPORTS, json.dumps(modules)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_module_imports_first_in_a_fresh_interpreter():
    # A cycle of top-level imports raises ImportError ("partially initialized module") only
    # when its modules are imported in one order: here each module goes first.
    modules = [m for m in module_files() if not m.endswith("__main__")]
    assert first_import_failures(modules) == {}


def test_the_first_import_check_reports_a_circle(tmp_path):
    (tmp_path / "circle_a.py").write_text("from circle_b import B\nA = 1\n")
    (tmp_path / "circle_b.py").write_text("from circle_a import A\nB = 1\n")
    failed = first_import_failures(["circle_a", "json"], tmp_path)
    assert list(failed) == ["circle_a"]
    assert "partially initialized module" in failed["circle_a"]
