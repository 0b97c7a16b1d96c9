"""Nothing but jobs/transitions.py writes a status, creates a lease or ends one.

docs/states.md: the moves are the functions of `jobs/transitions.py`, each a compare-and-set
that writes its audit event. This test reads every first-party module (not the tests, not
the migrations) and finds each way of going around them:

- `update(status=…)` (or `released_at=`, `release_reason=`), `**{"status": …}` included;
- `obj.status = …` (then a `save()`), `setattr(obj, "status", …)`;
- `bulk_update(objs, ["status", …])`, or with fields it cannot read;
- a Host, Job or Lease built or created with a status (`Host(status=…)`,
  `Job.objects.create(status=…)`, `get_or_create(defaults={"status": …})` …);
- creating a lease: `Lease(…)`, `Lease.objects.create` / `bulk_create` / `get_or_create`;
- raw SQL: `UPDATE … SET status`, `INSERT INTO jobs_lease`, or any SQL naming the lease
  table through `Lease._meta.db_table`.

The code is read with `ast`; only the text of SQL strings is matched with a pattern. What is
left is ALLOWED, each with its reason, and an entry nothing matches any more fails too.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The fields a move writes: a job's or host's status, a lease's ending.
STATE_FIELDS = frozenset({"status", "released_at", "release_reason"})
# The models whose state is a machine in jobs/transitions.py, and where they are defined.
MODELS = {"Host": "hosts.models", "Job": "jobs.models", "Lease": "jobs.models"}
CREATES = frozenset({"create", "bulk_create", "get_or_create", "update_or_create"})
# Every first-party module but these, each for its reason:
SKIPPED_PARTS = {
    "tests": "a test puts rows in the states it starts from",
    "migrations": "schema history; its SQL maintains the change log and usage tables",
    "bench": "seeds a measurement database with rows in given states, as a test does",
    "runner": "standard library and requests only: it reaches the database through the API",
    ".venv": "not ours",
    "build": "not ours",
}

# SQL is text: the SET list of an UPDATE (up to its WHERE, FROM or RETURNING) that assigns a
# state field, an INSERT into the lease table by name, and any INSERT at all.
SET_LIST = re.compile(
    r"\bUPDATE\b.*?\bSET\b(.*?)(?=\bWHERE\b|\bFROM\b|\bRETURNING\b|;|$)", re.I | re.S
)
SETS_STATE = re.compile(r"(^|,)\s*\W?(status|released_at|release_reason)\W?\s*=", re.I)
INSERT_LEASE = re.compile(r"\bINSERT\s+INTO\s+\W?jobs_lease\b", re.I)
INSERT = re.compile(r"\bINSERT\s+INTO\b", re.I)

# (file, kind) -> why it may write a state without a move. Keep it short.
ALLOWED: dict[tuple[str, str], str] = {
    ("hosts/services.py", "Host.objects.create(status=…)"): (
        "host_create: a new host's first status is not a move (docs/states.md), and its "
        "`created` event records it"
    ),
}


def modules() -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        ours = set(SKIPPED_PARTS).isdisjoint(rel.parts) and not rel.parts[0].endswith(".egg-info")
        if ours and rel != Path("jobs/transitions.py"):
            yield path


def model_names(tree: ast.Module) -> dict[str, str]:
    """Local name -> model, for every model imported into the module (aliases too).

    Host, Job and Lease keep their names; any other model is "" (its status is not a move's).
    """
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("models"):
            for alias in node.names:
                ours = MODELS.get(alias.name) == node.module
                names[alias.asname or alias.name] = alias.name if ours else ""
    return names


def root_name(node: ast.expr) -> str | None:
    """The name a chain of attributes and calls starts from: `Lease` in Lease.objects.all()."""
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def string_keys(node: ast.expr | None) -> set[str]:
    """The string constants of a literal list, tuple, set or dict's keys."""
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return {e.value for e in node.elts if isinstance(e, ast.Constant)}
    if isinstance(node, ast.Dict):
        return {k.value for k in node.keys if isinstance(k, ast.Constant)}
    return set()


def written_fields(call: ast.Call) -> set[str]:
    """The fields a call sets by keyword: `f(status=…)`, `f(**{"status": …})`."""
    named = {kw.arg for kw in call.keywords if kw.arg}
    spread = set().union(*(string_keys(kw.value) for kw in call.keywords if kw.arg is None))
    return (named | spread) & STATE_FIELDS


def sql_text(node: ast.expr) -> str:
    """A string constant, or an f-string's literal parts with its fields as `?`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(sql_text(v) if isinstance(v, ast.Constant) else "?" for v in node.values)
    return ""


def is_lease_table(node: ast.expr, models: dict[str, str]) -> bool:
    """`Lease._meta.db_table`: how raw SQL names the lease table without spelling it."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "db_table"
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "_meta"
        and models.get(root_name(node.value) or "") == "Lease"
    )


def sql_writes(tree: ast.Module, models: dict[str, str]) -> Iterator[tuple[str, int]]:
    """Raw SQL that writes a state or inserts a lease: in any string of the module, or, for
    an INSERT into the table `Lease._meta.db_table` names, in the function that names it."""
    for node in ast.walk(tree):
        text = sql_text(node) if isinstance(node, ast.expr) else ""
        if any(SETS_STATE.search(m.group(1)) for m in SET_LIST.finditer(text)):
            yield "UPDATE … SET status", node.lineno
        if INSERT_LEASE.search(text):
            yield "INSERT INTO jobs_lease", node.lineno
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inside = list(ast.walk(node))
            names_table = [n for n in inside if is_lease_table(n, models)]
            inserts = any(INSERT.search(sql_text(n)) for n in inside if isinstance(n, ast.expr))
            if names_table and inserts:
                yield "INSERT INTO jobs_lease", names_table[0].lineno


def assigned(node: ast.AST) -> Iterator[tuple[str, int]]:
    """`obj.status = …` (and `a.status, b = …`, `obj.status += …`): a save() writes it."""
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Attribute) and t.attr in STATE_FIELDS:
                    yield "obj.status = …", node.lineno


def called(node: ast.Call, models: dict[str, str]) -> Iterator[str]:
    """The kinds of write a call makes, if any."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    model = models.get(root_name(func) or "")  # None: not a model's name, or not known
    if name == "update" and written_fields(node) and model != "":
        yield "update(status=…)"
    if name == "setattr" and len(node.args) > 1:
        field = node.args[1]  # a name held in a variable is not read: copying a form's fields
        if isinstance(field, ast.Constant) and field.value in STATE_FIELDS:
            yield "setattr(obj, 'status', …)"
    if name == "bulk_update":
        fields = node.args[1] if len(node.args) > 1 else None
        keys = string_keys(next((kw.value for kw in node.keywords if kw.arg == "fields"), fields))
        if not keys or keys & STATE_FIELDS:  # fields it cannot read may hold a status
            yield "bulk_update(…, ['status'])"
    if model and isinstance(func, ast.Name):  # building an instance: Host(…), LeaseRow(…)
        if model == "Lease":
            yield "Lease(…)"
        elif written_fields(node):
            yield f"{model}(status=…)"
    if model and name in CREATES:
        defaults = next((kw.value for kw in node.keywords if kw.arg == "defaults"), None)
        if model == "Lease":
            yield f"Lease.objects.{name}"
        elif written_fields(node) or string_keys(defaults) & STATE_FIELDS:
            yield f"{model}.objects.{name}(status=…)"


def state_writes(path: Path) -> Iterator[tuple[str, int]]:
    """(kind, line) of every write of a state, or creation of a lease, in the module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    models = model_names(tree)
    yield from sql_writes(tree, models)
    for node in ast.walk(tree):
        yield from assigned(node)
        if isinstance(node, ast.Call):
            yield from ((kind, node.lineno) for kind in called(node, models))


def found() -> dict[tuple[str, str], list[int]]:
    hits: dict[tuple[str, str], list[int]] = {}
    for path in modules():
        for kind, line in state_writes(path):
            hits.setdefault((str(path.relative_to(ROOT)), kind), []).append(line)
    return hits


def test_only_the_transitions_module_writes_a_state_or_creates_a_lease():
    hits = found()
    unexplained = {key: lines for key, lines in hits.items() if key not in ALLOWED}
    assert unexplained == {}, "write it through a move of jobs/transitions.py"
    assert set(ALLOWED) - set(hits) == set(), "an allowed write is gone: drop its entry"
