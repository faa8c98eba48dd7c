"""CHANGELOG.md keeps the Keep a Changelog shape a reader relies on: per release one section of
each kind, and no file or folder that is still in the repository listed under Removed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHANGELOG = ROOT / "CHANGELOG.md"
KINDS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")


def releases(text: str) -> dict[str, list[tuple[str, str]]]:
    """Each `## [version]` with its `### Kind` sections, in order, and their text."""
    found: dict[str, list[tuple[str, str]]] = {}
    for block in re.split(r"^## ", text, flags=re.M)[1:]:
        title, _, body = block.partition("\n")
        parts = re.split(r"^### (.+)$", body, flags=re.M)
        found[title.strip()] = list(zip(parts[1::2], parts[2::2], strict=True))
    return found


def is_repo_path(name: str) -> bool:
    """A name that could be a file or folder of the repository, e.g. `Dockerfile`,
    `core/store.py` (not `..`, an option or an absolute path)."""
    return bool(re.fullmatch(r"[\w][\w.-]*(/[\w][\w.-]*)*", name)) and ".." not in name


def test_each_release_has_one_section_per_kind() -> None:
    problems = []
    for release, sections in releases(CHANGELOG.read_text()).items():
        kinds = [kind.strip() for kind, _ in sections]
        problems += [f"{release}: unknown kind {k!r}" for k in kinds if k not in KINDS]
        problems += [f"{release}: {k} twice" for k in sorted(set(kinds)) if kinds.count(k) > 1]
    assert not problems, "CHANGELOG.md: " + "; ".join(problems)


def test_nothing_listed_as_removed_is_still_there() -> None:
    still_there = []
    for release, sections in releases(CHANGELOG.read_text()).items():
        for kind, body in sections:
            if kind.strip() != "Removed":
                continue
            for name in re.findall(r"`([^`\s]+)`", body):
                path = name.rstrip("/")
                if is_repo_path(path) and (ROOT / path).exists():
                    still_there.append(f"{release}: {name}")
    assert not still_there, f"CHANGELOG.md lists as removed what the repository has: {still_there}"
