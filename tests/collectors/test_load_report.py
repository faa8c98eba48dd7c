"""A broker's load report: a report, none (204, NoopLoadManager), or none because its load
manager keeps none behind this call (the extensible load manager's 500), and a real failure."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import responses

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.brokers import collect_load_report
from pulsar_lens.core.errors import AdminApiError

BASE = "http://broker-0:8080"
REPORT = f"{BASE}/admin/v2/broker-stats/load-report"
# what a Pulsar 4.0 broker with the extensible load manager answers, on every call
EXTENSIBLE = (
    "\n --- An unexpected error occurred in the server ---\n\nMessage: null\n\nStacktrace:\n\n"
    "java.lang.UnsupportedOperationException\n\tat org.apache.pulsar.broker.loadbalance."
    "extensions.ExtensibleLoadManagerWrapper.generateLoadReport(ExtensibleLoadManagerWrapper"
    ".java:121)\n\tat org.apache.pulsar.broker.admin.impl.BrokerStatsBase.getLoadReport("
)


@pytest.fixture
def mock() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock() as rsps:
        yield rsps


def load_report() -> object:
    with AdminClient(BASE, backoff=0.0) as client:
        return collect_load_report(client, BASE, timeout=5)


def test_a_report_is_returned(mock: responses.RequestsMock) -> None:
    mock.get(REPORT, json={"cpu": {"usage": 12.5, "limit": 200}})
    assert load_report() == {"cpu": {"usage": 12.5, "limit": 200}}


@pytest.mark.parametrize(
    ("status", "body"), [(204, ""), (500, EXTENSIBLE)], ids=["noop", "extensible"]
)
def test_a_load_manager_that_keeps_no_report_gives_none(
    mock: responses.RequestsMock, status: int, body: str
) -> None:
    mock.get(REPORT, status=status, body=body)
    assert load_report() is None
    assert len(mock.calls) == 1  # asked once, not retried


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (500, "\n --- An unexpected error occurred in the server ---\n\nMessage: null\n"),
        (503, EXTENSIBLE.replace("UnsupportedOperation", "IllegalState")),
        (403, "UnsupportedOperationException"),
    ],
    ids=["other-500", "other-exception", "not-a-500"],
)
def test_any_other_failure_is_an_error(
    mock: responses.RequestsMock, status: int, body: str
) -> None:
    mock.get(REPORT, status=status, body=body)
    with pytest.raises(AdminApiError) as raised:
        load_report()
    assert raised.value.status == status
