"""The listing of `pulsar-lens plugins`: third-party code imported only in workers, what it
shows the same as `discover()` finds, and the listing cache."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pulsar_lens.cli.main import main
from pulsar_lens.cli.plugins_cmd import registry_listing
from pulsar_lens.plugins.isolation import Limits
from pulsar_lens.plugins.listcache import FILE_NAME
from pulsar_lens.plugins.listing import Listing, list_plugins
from pulsar_lens.plugins.registry import Registry, discover
from pulsar_lens.plugins.sources import module_name
from tests.plugins.test_registry import GOOD

MARKED = """
import os
with open({marks!r}, "a") as marks:
    marks.write(f"{{os.getpid()}}\\n")
from pulsar_lens.plugins.builtin.subscription_status import SubscriptionStatus

class Marked(SubscriptionStatus):
    name = "marked"
    requires = ("subscription-status",)

PLUGINS = (Marked,)
"""

LIMITS = Limits(import_timeout=3.0)


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def marked_folder(tmp_path: Path) -> tuple[Path, Path]:
    """A drop-in folder whose plugin notes the pid of each process importing it, and a
    helper beside it; the folder and the file of pids."""
    folder, marks = tmp_path / "plugins", tmp_path / "marks"
    write(folder, "marked.py", MARKED.format(marks=str(marks)))
    write(folder, "_helper.py", "VALUE = 1\n")
    return folder, marks


def importers(marks: Path) -> list[int]:
    return [int(pid) for pid in marks.read_text().split()] if marks.exists() else []


def listed(folder: Path, cache: Path | None, *, fresh: bool = False) -> Listing:
    return list_plugins(plugin_dirs=[folder], limits=LIMITS, cache_dir=cache, fresh=fresh)


def as_listing(registry: Registry) -> dict[str, Any]:
    """What `plugins --json` showed when it listed `discover()`'s registry."""
    loaded = [
        {
            "name": p.name,
            "title": p.title,
            "version": p.version,
            "engine": p.engine,
            "api_version": p.plugin.api_version,
            "requires": list(p.plugin.requires),
            "source": p.source,
        }
        for p in sorted(registry, key=lambda p: p.name)
    ]
    failed = [
        {"plugin": f.plugin, "source": f.source, "error": f.message} for f in registry.failures
    ]
    return {"loaded": loaded, "failed": failed}


def test_listing_imports_drop_ins_only_in_worker_processes(tmp_path: Path) -> None:
    folder, marks = marked_folder(tmp_path)
    listing = listed(folder, None)
    assert "marked" in listing.plugins and not listing.failures
    assert importers(marks) and os.getpid() not in importers(marks)
    assert module_name(folder / "marked.py") not in sys.modules


def test_listing_shows_what_discover_finds(tmp_path: Path) -> None:
    folder, _ = marked_folder(tmp_path)
    write(folder, "good.py", GOOD.format(cls="Good", slug="good-one"))
    write(folder, "dup.py", GOOD.format(cls="Dup", slug="stuck-hashes"))
    write(folder, "raises.py", "raise ValueError('nope')\n")
    write(folder, "syntax.py", "def broken(:\n")
    write(folder, "unlisted.py", "X = 1\n")
    write(folder, "invalid.py", GOOD.format(cls="Invalid", slug="Not_Kebab"))
    write(folder, "wants.py", GOOD.format(cls="Wants", slug="wants") + "Wants.requires = ('x',)\n")
    two = GOOD.format(cls="One", slug="one") + GOOD.format(cls="Two", slug="two")
    write(folder, "two.py", two + "PLUGINS = (One, Two)\n")
    listing = registry_listing(listed(folder, None))
    assert listing == as_listing(discover(plugin_dirs=[folder], limits=LIMITS))
    assert len(listing["failed"]) == 6  # every kind of failure above is there


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "import time\ntime.sleep(3600)\n",
            "import failed: import timed out after 3 s; it was stopped",
        ),
        (
            "import os\nos._exit(3)\n",
            "import failed: import ended its worker process (exit code 3)",
        ),
        (
            "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
            "import failed: import ended its worker process (killed by signal 9)",
        ),
    ],
)
def test_listing_a_drop_in_that_hangs_exits_or_crashes_at_import_is_its_failure(
    tmp_path: Path, body: str, expected: str
) -> None:
    folder, cache = tmp_path / "plugins", tmp_path / "cache"
    write(folder, "bad.py", body)
    listing = listed(folder, cache)
    (failure,) = listing.failures
    assert (failure.source, failure.message) == (str(folder / "bad.py"), expected)
    assert "subscription-status" in listing.plugins
    assert not (cache / FILE_NAME).exists()  # a failure is not kept
    assert registry_listing(listing) == as_listing(discover(plugin_dirs=[folder], limits=LIMITS))


def test_listing_cache_answers_an_unchanged_run_without_a_worker(tmp_path: Path) -> None:
    folder, marks = marked_folder(tmp_path)
    cache = tmp_path / "cache"
    first = listed(folder, cache)
    imports = importers(marks)
    second = listed(folder, cache)
    assert (first.from_cache, second.from_cache) == (False, True)
    assert importers(marks) == imports  # nothing imported the drop-in again
    assert registry_listing(second) == registry_listing(first)


@pytest.mark.parametrize("edited", ["marked.py", "_helper.py"])
def test_listing_cache_misses_after_a_file_of_the_folder_changed(
    tmp_path: Path, edited: str
) -> None:
    folder, marks = marked_folder(tmp_path)
    cache = tmp_path / "cache"
    listed(folder, cache)
    path = folder / edited
    path.write_text(path.read_text() + "# edited\n")
    imports = len(importers(marks))
    again = listed(folder, cache)
    assert not again.from_cache and len(importers(marks)) > imports
    assert listed(folder, cache).from_cache  # and the new answers are kept


def test_listing_cache_misses_when_a_drop_in_is_added(tmp_path: Path) -> None:
    folder, _ = marked_folder(tmp_path)
    cache = tmp_path / "cache"
    listed(folder, cache)
    write(folder, "good.py", GOOD.format(cls="Good", slug="good-one"))
    again = listed(folder, cache)
    assert not again.from_cache and "good-one" in again.plugins


@pytest.mark.parametrize(
    "damage",
    [
        "{not json",
        "\udcff",
        "[]",
        '{"format": 1, "key": null, "answers": {}}',
        "KEYED",
    ],
)
def test_listing_cache_ignores_and_rewrites_a_damaged_entry(tmp_path: Path, damage: str) -> None:
    folder, _ = marked_folder(tmp_path)
    cache = tmp_path / "cache"
    good = registry_listing(listed(folder, cache))
    entry = cache / FILE_NAME
    if damage == "KEYED":  # the right key over answers of the wrong shape
        kept = json.loads(entry.read_text())
        kept["answers"] = {source: [["x", {"name": 1}]] for source in kept["answers"]}
        entry.write_text(json.dumps(kept))
    else:
        entry.write_bytes(damage.encode("utf-8", "surrogateescape"))
    again = listed(folder, cache)
    assert not again.from_cache and registry_listing(again) == good
    assert json.loads(entry.read_text())["answers"]  # rewritten
    assert listed(folder, cache).from_cache


def test_listing_a_failure_removes_the_kept_answers(tmp_path: Path) -> None:
    folder, _ = marked_folder(tmp_path)
    cache = tmp_path / "cache"
    listed(folder, cache)
    write(folder, "bad.py", "raise ValueError('nope')\n")
    assert listed(folder, cache).failures
    assert not (cache / FILE_NAME).exists()


def test_plugins_cmd_reads_the_cache_and_fresh_asks_the_workers_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, marks = marked_folder(tmp_path)
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(folder))
    monkeypatch.setenv("PULSAR_LENS_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["plugins", "--json"]) == 0
    first = capsys.readouterr().out
    imports = len(importers(marks))
    assert main(["plugins", "--json"]) == 0
    assert capsys.readouterr().out == first and len(importers(marks)) == imports
    assert main(["plugins", "--json", "--fresh"]) == 0
    assert capsys.readouterr().out == first and len(importers(marks)) == imports + 1
    assert os.getpid() not in importers(marks)
    assert (tmp_path / "cache" / FILE_NAME).exists()
