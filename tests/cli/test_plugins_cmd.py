"""`pulsar-lens plugins` and `pulsar-lens analyze` on a real store written in a temp folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pulsar_lens.cli.main import main
from pulsar_lens.core.model import SubscriptionRecord
from pulsar_lens.core.store import Store
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.builtin.subscription_status import SubscriptionStatus
from pulsar_lens.plugins.precompute import compute_results
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.results import CHOICES, ResultStore, StoredValues
from pulsar_lens.plugins.testing import TOPIC, make_snapshot

VERSION = SubscriptionStatus.version  # the listing and the results name the plugin's own version


def stalled_store(root: Path) -> Path:
    store = Store(root)
    for i, backlog in enumerate((10, 20, 30)):
        sub = SubscriptionRecord(
            TOPIC,
            "billing",
            type="Shared",
            msg_backlog=backlog,
            consumer_count=1,
            msg_rate_out=4.0,
            msg_ack_rate=0.0,
            is_durable=True,
        )
        store.write(make_snapshot(i * 10, subscriptions=(sub,)))
    return root


def test_plugins_cmd_lists_builtins_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    status = next(p for p in listing["loaded"] if p["name"] == "subscription-status")
    assert status == {
        "name": "subscription-status",
        "title": "Subscription status",
        "version": VERSION,
        "engine": "light",
        "api_version": 1,
        "requires": [],
        "source": "builtin pulsar_lens.plugins.builtin.subscription_status:SubscriptionStatus",
    }
    assert listing["failed"] == []


def test_plugins_cmd_lists_failures_in_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.py").write_text("raise ValueError('nope')\n")
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(tmp_path))
    assert main(["plugins"]) == 1
    out = capsys.readouterr().out
    assert "stuck-hashes" in out and "failed to load" in out
    assert f"{tmp_path / 'bad.py'}: import failed: ValueError: nope" in out


def test_plugins_cmd_shows_api_versions_and_requirements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "builds.py").write_text(
        "from pulsar_lens.plugins.builtin.subscription_status import SubscriptionStatus\n"
        "class Builds(SubscriptionStatus):\n"
        "    name = 'builds-on-status'\n"
        "    requires = ('subscription-status',)\n"
        "PLUGINS = (Builds,)\n"
    )
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(tmp_path))
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert f"  subscription-status    {VERSION:<8} light  api 1  Subscription status\n" in out
    assert f"from {tmp_path / 'builds.py'}\n{'':<24} requires subscription-status\n" in out


def test_plugins_cmd_analyze_prints_json_frames(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = stalled_store(tmp_path / "store")
    code = main(
        ["analyze", "subscription-status", "--store", str(store), "--json", "--param", "window=3"]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["plugin"], out["version"], len(out["snapshot_ids"])) == (
        "subscription-status",
        VERSION,
        3,
    )
    assert out["summary"]["worst"] == "STALL"
    (row,) = out["frames"]["status"]
    assert (row["status"], row["msg_backlog"], row["last_acked_at"]) == ("STALL", 30, None)
    assert out["frames"]["backlog"][0]["collected_at"] == "2026-11-21T12:00:00.000Z"


def test_plugins_cmd_analyze_prints_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PULSAR_LENS_STORE", str(stalled_store(tmp_path / "store")))
    assert main(["analyze", "subscription-status"]) == 0
    out = capsys.readouterr().out
    assert f"subscription-status {VERSION} on 3 snapshot(s)" in out
    assert "== status (1 rows)" in out and "STALL" in out


def test_plugins_cmd_analyze_unknown_slug(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "no-such-plugin"]) == 2
    err = capsys.readouterr().err
    loaded = err.partition("loaded plugins: ")[2]
    assert "'no-such-plugin'" in err and "bundle-ownership" in loaded.split(", ")


@pytest.mark.parametrize(
    ("param", "text"),
    [
        ("window=1", "window: Input should be greater than or equal to 2"),
        ("windo=3", "unknown windo; known: topic, subscription, window, include_system"),
        ("window", "--param takes KEY=VALUE, found 'window'"),
    ],
)
def test_plugins_cmd_analyze_bad_param(
    param: str, text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = stalled_store(tmp_path / "store")
    assert main(["analyze", "subscription-status", "--store", str(store), "--param", param]) == 2
    assert text in capsys.readouterr().err


def test_plugins_cmd_analyze_checks_a_param_against_a_long_stored_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A list of choices too long for meta.json (one per topic) is read to check a param."""
    root = tmp_path / "store"
    store = Store(root)
    topics = [f"persistent://public/default/t{i:03d}" for i in range(150)]
    subs = tuple(SubscriptionRecord(t, "billing", type="Shared", consumer_count=1) for t in topics)
    store.write(make_snapshot(0, subscriptions=subs))
    registry = discover(entry_points=False)
    compute_results(store, [registry.get("incident-timeline")], results=ResultStore(root))
    (entry, meta), *_ = ResultStore(root).entries("incident-timeline")
    assert meta["choice_counts"] == {"topic": 151} and (entry / CHOICES).exists()

    args = ["analyze", "incident-timeline", "--store", str(root), "--param"]
    assert main([*args, f"topic={topics[149]}"]) == 0
    assert main([*args, "topic=persistent://public/default/nope"]) == 2
    err = capsys.readouterr().err
    assert "is not in the stored snapshots" in err and "(151 in all)" in err


def test_plugins_cmd_analyze_leaves_a_param_unchecked_when_its_stored_list_went(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The collector prunes the entry between reading its meta.json and its list: the value
    cannot be checked, which is said, rather than refused against an empty list."""
    root = tmp_path / "store"
    store = Store(root)
    topics = [f"persistent://public/default/t{i:03d}" for i in range(150)]
    subs = tuple(SubscriptionRecord(t, "billing", type="Shared", consumer_count=1) for t in topics)
    store.write(make_snapshot(0, subscriptions=subs))
    compute_results(
        store, [discover(entry_points=False).get("incident-timeline")], results=ResultStore(root)
    )

    read = StoredValues.values

    def pruned_first(self: StoredValues) -> list[str]:
        shutil.rmtree(root / "results", ignore_errors=True)  # the collector prunes it now
        return read(self)

    runner.clear_cache()  # the stored entry is read, as by a command run after the collector
    monkeypatch.setattr(StoredValues, "values", pruned_first)
    args = ["analyze", "incident-timeline", "--store", str(root), "--param"]
    assert main([*args, "topic=persistent://public/default/nope"]) == 0
    err = capsys.readouterr().err
    assert "--param topic of incident-timeline is not checked" in err
    assert "is not in the stored snapshots" not in err


def test_plugins_cmd_analyze_empty_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", "stuck-hashes", "--store", str(tmp_path / "empty")]) == 1
    assert "no snapshots yet: run `pulsar-lens collect --once`" in capsys.readouterr().err


def test_plugins_cmd_json_exits_1_when_a_plugin_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.py").write_text("def broken(:\n")
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(tmp_path))
    assert main(["plugins", "--json"]) == 1
    (failure,) = json.loads(capsys.readouterr().out)["failed"]
    assert failure["source"] == str(tmp_path / "bad.py")
    assert "SyntaxError" in failure["error"]


def test_analyze_unknown_slug_names_the_files_that_failed_to_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "backlog_growth.py").write_text("def broken(:\n")
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", str(tmp_path))
    store = stalled_store(tmp_path / "store")
    assert main(["analyze", "backlog-growth", "--store", str(store)]) != 0
    err = capsys.readouterr().err
    assert "no plugin has this name" in err
    assert "1 failed to load and may define it" in err
    assert f"{tmp_path / 'backlog_growth.py'}: import failed: SyntaxError" in err


def test_the_command_line_loads_the_plugins_only_for_a_command_that_needs_them() -> None:
    """Every `pulsar-lens` process builds the parser of every command: loading the plugin
    contract (and altair with it) there cost each command's start, a refusal's too, a second."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from pulsar_lens.cli.main import build_parser\n"
        "build_parser()\n"
        "print(sorted(m for m in ('altair', 'pulsar_lens.api', 'pulsar_lens.plugins.registry')"
        " if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
