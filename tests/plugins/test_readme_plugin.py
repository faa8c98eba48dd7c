"""The plugin the README shows a newcomer loads as a drop-in file and does what it says: the
ten largest backlogs of the newest snapshot, as a table."""

from __future__ import annotations

import re
from pathlib import Path

from pulsar_lens.core.model import SubscriptionRecord
from pulsar_lens.plugins.registry import discover
from pulsar_lens.plugins.testing import make_inputs_from_records

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_plugin() -> str:
    """The Python block of the README's "Add a plugin" section."""
    text = README.read_text()
    section = text[text.index("## Add a plugin") :]
    match = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert match, "README.md: the 'Add a plugin' section has no Python block"
    return match.group(1)


def test_the_readme_plugin_loads_and_lists_the_largest_backlogs(tmp_path: Path) -> None:
    (tmp_path / "backlog_top.py").write_text(readme_plugin())
    registry = discover(builtins=False, entry_points=False, plugin_dirs=[tmp_path])
    assert registry.failures == []
    loaded = registry.get("backlog-top")
    subs = [
        SubscriptionRecord(topic=f"persistent://t/ns/t{i}", subscription="s", msg_backlog=i)
        for i in range(15)
    ]
    older = [SubscriptionRecord(topic="persistent://t/ns/old", subscription="s", msg_backlog=99)]
    inputs = make_inputs_from_records(
        ["subscriptions"], [{"subscriptions": older}, {"subscriptions": subs}]
    )
    plugin = loaded.plugin
    result = plugin.analyze(inputs, plugin.Params())
    top = result.frames["top"]
    assert list(top["msg_backlog"]) == list(range(14, 4, -1))  # the newest poll only
    [table] = plugin.render(result)
    assert table.title == "Largest backlogs"
    assert list(table.frame["topic"]) == [f"persistent://t/ns/t{i}" for i in range(14, 4, -1)]
