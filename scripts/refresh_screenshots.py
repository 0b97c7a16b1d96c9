"""Refresh docs/screenshots/ from the browser tests: `make screenshots`.

The browser tests save their screenshots into a pytest temporary folder, never into the
repository. With SCHEDSITE_SCREENSHOTS naming a folder they save there instead: this runs
them so, into build/screenshots/ (gitignored), then copies the few the docs show, SHOWN, into
docs/screenshots/. Extra arguments go to pytest (`-k tour`, `-x`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "build" / "screenshots"
DOCS = ROOT / "docs" / "screenshots"
# docs/screenshots/<file> -> the name a browser test saves it under.
SHOWN = {
    "dashboard.png": "02-dashboard",  # tests/ui/browser/test_screenshots.py, the tour
    "hosts.png": "03-hosts",
    "queue.png": "08-queue",
    "submit-suite.png": "submit-suite-error",  # test_browser.py
    "suite-preview.png": "suite-preview-prod",  # test_preview_browser.py
    "suite-rerun-clone.png": "suite-finished-with-rerun-and-clone",  # test_rerun_clone_browser.py
    "suite-clone-form.png": "suite-clone-form",
    "host-import.png": "host-import-preview",  # test_inventory_browser.py
    "host-reservation.png": "host-reservation",  # test_host_page_browser.py
    "host.png": "host-health",  # test_health_browser.py
    "profile-notifications.png": "profile-notifications-debug0",  # test_notifications_browser.py
    "delivery-log.png": "delivery-log-debug0",
    "suite-template.png": "suite-template",  # test_templates_browser.py
    "reliability-hosts.png": "reliability-hosts",  # test_reliability_browser.py
    "scheduler-settings.png": "scheduler-settings-prod",  # test_settings_browser.py
    "multihost-form.png": "multihost-form-refused-prod",  # test_multihost_browser.py
    "multihost-job.png": "multihost-job-prod",
    "pool-targets-list.png": "pool-targets-list",  # test_pool_targets_browser.py
    "dashboard-history.png": "dashboard-history",  # test_labels_browser.py
    "label-page.png": "label-page",
}


def main(pytest_args: list[str]) -> int:
    if SHOTS.exists():
        shutil.rmtree(SHOTS)  # a screenshot no test takes any more must not be copied
    env = {**os.environ, "SCHEDSITE_SCREENSHOTS": str(SHOTS)}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/ui/browser"]
    if subprocess.run([*command, *pytest_args], cwd=ROOT, env=env, check=False).returncode:
        print("browser tests failed: docs/screenshots/ left as it was", file=sys.stderr)
        return 1
    missing = sorted(shot for shot in SHOWN.values() if not (SHOTS / f"{shot}.png").exists())
    if missing:
        print(f"no test took {', '.join(missing)}: update SHOWN", file=sys.stderr)
        return 1
    for doc, shot in SHOWN.items():
        shutil.copyfile(SHOTS / f"{shot}.png", DOCS / doc)
    print(f"refreshed {len(SHOWN)} screenshots in docs/screenshots/ from {SHOTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
