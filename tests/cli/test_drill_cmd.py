"""`pulsar-lens drill unload` run as a user runs it: without the mutation switch it is
refused before it asks the cluster anything. (Its `--to` and its exit status on lost
messages, against real brokers: tests/live/test_drill_cmd_live.py.)"""

from __future__ import annotations

import pytest

from tests.fake_admin import FakeAdmin
from tests.lens_cli import run_lens

BUNDLE = "public/default/0x00000000_0x40000000"


@pytest.mark.parametrize("switch", [None, "", "0", "false", "no"])
@pytest.mark.parametrize("to", [(), ("--to", "127.0.0.1:8080")])
def test_drill_unload_is_refused_without_the_mutation_switch(
    switch: str | None, to: tuple[str, ...]
) -> None:
    with FakeAdmin() as admin:
        env = {"PULSAR_ADMIN_URL": admin.url}
        if switch is not None:
            env["PULSAR_LENS_ALLOW_MUTATIONS"] = switch
        done = run_lens("drill", "unload", "--bundle", BUNDLE, *to, env=env)
    assert done.returncode == 2, done.stderr
    assert "PULSAR_LENS_ALLOW_MUTATIONS=1" in done.stderr and BUNDLE in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert admin.requests == []  # nothing asked, nothing moved
