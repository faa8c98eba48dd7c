"""Starting a probe when the cluster's client fails: the error names the topic and leaves
nothing open, and the drill tries again while its time lasts (a lookup on a busy broker can
outlast the client's operation timeout once)."""

from __future__ import annotations

import time
from typing import Any

import _pulsar
import pytest

from pulsar_lens.collectors import probe as probe_module
from pulsar_lens.collectors.drill import start_probe
from pulsar_lens.collectors.probe import ProbeRunner, ProbeStartError, ProbeTarget
from pulsar_lens.core.mutations import MutationSettings

TARGET = ProbeTarget.of("public/default", "0x00000000_0x40000000")


class Handle:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Client:
    """A pulsar.Client stand-in: `fail` names the call that times out ("subscribe",
    "create_producer"), or is refused ("refused"), or is None."""

    def __init__(self, fail: str | None) -> None:
        self.fail = fail
        self.closed = False
        self.handles: list[Handle] = []

    def _handle(self, call: str) -> Handle:
        if call == self.fail:
            raise _pulsar.Timeout("Pulsar error: TimeOut")
        if self.fail == "refused":
            raise _pulsar.AuthorizationError("Pulsar error: AuthorizationError")
        self.handles.append(Handle())
        return self.handles[-1]

    def subscribe(self, *_args: Any, **_kwargs: Any) -> Handle:
        return self._handle("subscribe")

    def create_producer(self, *_args: Any, **_kwargs: Any) -> Handle:
        return self._handle("create_producer")

    def close(self) -> None:
        self.closed = True


def runner(monkeypatch: pytest.MonkeyPatch, *fails: str | None) -> tuple[ProbeRunner, list[Client]]:
    """A runner whose successive clients fail as `fails` say."""
    made: list[Client] = []
    plan = iter(fails)

    def client(_url: str, **_options: Any) -> Client:
        made.append(Client(next(plan)))
        return made[-1]

    monkeypatch.setattr(probe_module, "pulsar_client", client)
    probe = ProbeRunner(
        "pulsar://127.0.0.1:6650",
        [TARGET],
        lambda _rows: None,
        mutations=MutationSettings(allow=True),
    )
    return probe, made


@pytest.mark.parametrize("fail", ["subscribe", "create_producer"])
def test_a_failed_start_names_the_topic_and_leaves_nothing_open(
    monkeypatch: pytest.MonkeyPatch, fail: str
) -> None:
    probe, made = runner(monkeypatch, fail)
    with pytest.raises(ProbeStartError) as raised:
        probe.start()
    assert TARGET.topic in str(raised.value)
    assert "TimeOut" in str(raised.value)
    assert isinstance(raised.value.__cause__, _pulsar.Timeout)
    assert raised.value.transient
    (client,) = made
    assert client.closed
    assert all(handle.closed for handle in client.handles)
    assert probe._threads == []  # nothing runs after a failed start


def test_the_drill_starts_the_probe_again_while_its_time_lasts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("pulsar_lens.collectors.drill.RETRY_PAUSE", 0.01)
    probe, made = runner(monkeypatch, "subscribe", "create_producer", None)
    steps: list[str] = []
    start_probe(probe, time.monotonic() + 60, steps.append)
    try:
        assert len(made) == 3
        assert made[0].closed and made[1].closed and not made[2].closed
        assert len(steps) == 2
        assert all(TARGET.topic in line and "trying again" in line for line in steps)
        assert [len(c.handles) for c in made] == [0, 1, 2]
    finally:
        probe.stop(drain=0)
    assert made[2].closed


def test_the_drill_gives_up_when_no_time_is_left(monkeypatch: pytest.MonkeyPatch) -> None:
    probe, made = runner(monkeypatch, "subscribe", None)
    steps: list[str] = []
    with pytest.raises(ProbeStartError) as raised:
        start_probe(probe, time.monotonic(), steps.append)
    assert raised.value.setting == "--timeout"
    assert "drill's timeout" in str(raised.value) and TARGET.topic in str(raised.value)
    assert len(made) == 1 and made[0].closed
    assert steps == []


def test_the_drill_does_not_try_again_when_the_broker_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probe, made = runner(monkeypatch, "refused", None)
    steps: list[str] = []
    with pytest.raises(ProbeStartError) as raised:
        start_probe(probe, time.monotonic() + 60, steps.append)
    assert not raised.value.transient
    assert "AuthorizationError" in str(raised.value)
    assert len(made) == 1 and made[0].closed
    assert steps == []
