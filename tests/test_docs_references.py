"""Comments and docs cite the project's own docs, by anchors that exist, and no outside spec."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SUFFIXES = {".py", ".html", ".md"}
# Not the project's text: environments, build output, caches.
SKIP_DIRS = {".venv", ".git", "build", "dist", "node_modules", "__pycache__", "staticfiles"}

# Built from escapes, so that this file does not match its own patterns.
OUTSIDE_SPEC = re.compile(r"\bSPEC\s*\u00a7|\bSPEC\.md\b")
ISSUE_NUMBER = re.compile(r"\bissue\s+#?\d+", re.IGNORECASE)
# docs/<file>.md#anchor anywhere; inside docs/, also relative links: (file.md#anchor), (#anchor).
DOCS_ANCHOR = re.compile(r"\bdocs/([\w.-]+\.md)#([\w-]+)")
RELATIVE_ANCHOR = re.compile(r"\]\(((?:\.\./docs/)?[\w.-]+\.md)?#([\w-]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def project_files() -> Iterator[Path]:
    """Yield every .py, .html and .md file of the repository, sorted."""
    for path in sorted(ROOT.rglob("*")):
        rel = path.relative_to(ROOT).parts
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel[:-1]):
            continue
        if path.suffix in SUFFIXES and path.is_file():
            yield path


def github_slug(heading: str) -> str:
    """Return the anchor GitHub gives a heading: lower case, punctuation dropped, spaces → -."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(doc: Path) -> set[str]:
    """Return the anchors of a markdown file's headings (code blocks skipped, repeats numbered)."""
    seen: dict[str, int] = {}
    anchors: set[str] = set()
    in_code = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            in_code = not in_code
            continue
        match = None if in_code else HEADING.match(line)
        if match is None:
            continue
        slug = github_slug(match.group(2))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def citations() -> Iterator[tuple[str, Path, str]]:
    """Yield (where, cited docs file, anchor) for every docs anchor cited in the repository."""
    for path in project_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        rel = path.relative_to(ROOT)
        for number, line in enumerate(text.splitlines(), 1):
            where = f"{rel}:{number}"
            for name, anchor in DOCS_ANCHOR.findall(line):
                yield where, DOCS / name, anchor
            if path.parent == DOCS:
                for name, anchor in RELATIVE_ANCHOR.findall(line):
                    target = (DOCS / name).resolve() if name else path
                    yield where, target, anchor


def offending_lines(pattern: re.Pattern[str]) -> list[str]:
    found = []
    for path in project_files():
        if path == Path(__file__).resolve():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_no_file_cites_the_spec_outside_the_repository() -> None:
    # The spec is not part of the repository: a reader cannot follow the citation.
    assert offending_lines(OUTSIDE_SPEC) == []


def test_no_comment_says_which_issue_added_it() -> None:
    # Comments say why; the history is in git.
    assert offending_lines(ISSUE_NUMBER) == []


def test_every_cited_docs_anchor_exists() -> None:
    cited = list(citations())
    assert len(cited) > 10, "the scan found almost no citations; is it looking in the right place?"
    anchors: dict[Path, set[str]] = {}
    broken = []
    for where, doc, anchor in cited:
        if not doc.is_file():
            broken.append(f"{where}: {doc.relative_to(ROOT)} does not exist")
            continue
        if doc not in anchors:
            anchors[doc] = anchors_of(doc)
        if anchor not in anchors[doc]:
            broken.append(f"{where}: {doc.relative_to(ROOT)} has no heading #{anchor}")
    assert broken == []


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("The runner protocol and `run_worker`", "the-runner-protocol-and-run_worker"),
        ("Retrying a create: `Idempotency-Key`", "retrying-a-create-idempotency-key"),
        ("Quota phase", "quota-phase"),
        ("Host → lease (who holds it)", "host--lease-who-holds-it"),
    ],
)
def test_anchors_are_githubs_slugs_of_the_headings(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug
