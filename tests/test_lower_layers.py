"""Services, rules and models import no page or API module (docs/architecture.md).

A lower layer that imports an interface runs the interface's imports (DRF, templates) wherever
the service is used, and hides a rule in the interface: the submission schema and the duration
wording live below both (jobs/submission_schema.py, schedsite/durations.py).
"""

from __future__ import annotations

import re

from tests.test_import_graph import import_graph

# What shows or serves: pages, the API, template tags, the kernel's page helpers and its API
# plumbing (views, permissions, URLs, schema). The kernel's field types (schedsite.api_fields)
# are building blocks of the submission schema, not an interface.
INTERFACE = re.compile(
    r"(^|\.)(views\w*|api|templatetags|ui)(\.|$)"
    r"|^schedsite\.(api_(views|permissions|urls|schema|authentication|pagination|exceptions)"
    r"|throttles|ui_urls|urls)$"
)
# What decides and writes: services and the rules, state machines, models below them.
LOWER = re.compile(
    r"(^|\.)(services|selectors|querysets|transitions|models|limits|submission_schema"
    r"|suite_templates|resubmit|labfile|scheduling)(\.|$)"
)


def test_no_service_rule_or_model_imports_a_page_or_api_module() -> None:
    graph = import_graph()
    wrong = sorted(
        (module, target)
        for module, targets in graph.items()
        if LOWER.search(module) and not INTERFACE.search(module)
        for target in targets
        if INTERFACE.search(target)
    )
    assert wrong == []
