"""Real Pulsar 4.0 brokers for the live tier, started once per test run per configuration."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from lab.localpulsar import LocalPulsar


class BrokerPool:
    """Starts one standalone per distinct settings on first use; stops all at the end.

    A broker that cannot start raises: live tests fail loudly, they never skip.
    """

    def __init__(self) -> None:
        self._brokers: dict[tuple[object, ...], LocalPulsar] = {}
        self._lock = threading.Lock()

    def get(
        self,
        settings: Mapping[str, str] | None = None,
        *,
        jvm_options: tuple[str, ...] = (),
    ) -> LocalPulsar:
        items = tuple(sorted((settings or {}).items()))
        key = (items, jvm_options)
        with self._lock:
            broker = self._brokers.get(key)
            if broker is None:
                broker = LocalPulsar(settings=dict(items), jvm_options=jvm_options).start()
                self._brokers[key] = broker
            return broker

    def stop_all(self) -> None:
        with self._lock:
            for broker in self._brokers.values():
                broker.stop()
            self._brokers.clear()
