"""The store's path as the real commands meet it: a store that cannot be one is refused in one
line before anything runs, and `collect --retention` never deletes through a link."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pulsar_lens.core.store import Store
from tests.core.test_store_links import OLD_DAY, fingerprint, linked_name, old_store, one_file
from tests.fake_admin import FakeAdmin
from tests.lens_cli import run_lens

UNREACHABLE = "http://127.0.0.1:9"  # never asked: the store is refused first


def a_file(tmp: Path) -> Path:
    path = tmp / "passwd"
    path.write_text("root:x:0:0:root:/root:/bin/bash\n")
    return path


def below_a_file(tmp: Path) -> Path:
    return a_file(tmp) / "store"


def a_dangling_link(tmp: Path) -> Path:
    (tmp / "store").symlink_to(tmp / "gone")
    return tmp / "store"


def a_name_too_long(tmp: Path) -> Path:
    return tmp / ("s" * 300)


BAD_STORES: dict[str, Callable[[Path], Path]] = {
    "a file": a_file,
    "below a file": below_a_file,
    "a link to nothing": a_dangling_link,
    "a name too long": a_name_too_long,
}

COMMANDS: dict[str, tuple[str, ...]] = {
    "collect": ("collect", "--once", "--admin-url", UNREACHABLE),
    "serve": ("serve", "--admin-url", UNREACHABLE, "--port", "1", "--metrics-port", "0"),
    "serve offline": ("serve", "--port", "1", "--metrics-port", "0"),
    "analyze": ("analyze", "subscription-status"),
    "drill": ("drill", "unload", "--bundle", "public/default/0x00000000_0x40000000"),
    "demo": ("demo", "--port", "1", "--metrics-port", "0"),
}
# each command meets two kinds of bad store, each kind three commands: half the pairs
PAIRS = [(c, b) for i, c in enumerate(COMMANDS) for j, b in enumerate(BAD_STORES) if i % 2 == j % 2]


@pytest.mark.parametrize(("command", "bad"), PAIRS, ids=[f"{c}-{b}" for c, b in PAIRS])
def test_an_unusable_store_is_one_clear_line_and_exit_2(
    tmp_path: Path, command: str, bad: str
) -> None:
    store = BAD_STORES[bad](tmp_path)
    env = {"PULSAR_LENS_ALLOW_MUTATIONS": "1", "PULSAR_ADMIN_URL": UNREACHABLE}
    if command == "serve offline":
        env.pop("PULSAR_ADMIN_URL")
    done = run_lens(*COMMANDS[command], "--store", str(store), env=env, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("pulsar-lens: "), done.stderr
    assert str(store) in lines[0] and "--store" in lines[0]
    assert not done.stdout.strip()


def test_collect_retention_never_deletes_through_a_link(tmp_path: Path) -> None:
    outside = old_store(tmp_path / "outside")
    root = tmp_path / "store"
    for table in ("topics", "snapshots", "subscriptions"):
        (root / table).mkdir(parents=True)
        (root / table / f"date={OLD_DAY}").symlink_to(outside / table / f"date={OLD_DAY}")
    day = root / "consumers" / f"date={OLD_DAY}"
    day.mkdir(parents=True)
    source = one_file(outside / "consumers" / f"date={OLD_DAY}")
    (day / linked_name(source)).symlink_to(source)
    (root / "bundles").symlink_to(outside / "bundles")
    (root / "results").symlink_to(outside / "results")
    before = fingerprint(outside)
    with FakeAdmin() as fake:
        done = run_lens(
            "collect", "--once", "--retention", "1m", "--admin-url", fake.url, "--store", str(root)
        )
    assert done.returncode == 0, done.stderr
    assert fingerprint(outside) == before
    assert f"ignoring {root / 'topics' / f'date={OLD_DAY}'}: a symbolic link" in done.stderr
    assert "Traceback" not in done.stderr
    store = Store(root)
    assert len(store.snapshots()) == 1  # this poll; the old ones behind the links are not ours
    newest = store.snapshots()["collected_at"].iloc[-1]
    assert newest > dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    assert os.path.islink(root / "topics" / f"date={OLD_DAY}")  # left where it was
