"""AdminClient's TLS failures say which setting to fix (live: tests/live/test_security_live.py)."""

from __future__ import annotations

import pytest
import requests
import responses

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.core.errors import AdminApiUnreachable

BASE = "https://broker-0:8443"


@pytest.mark.parametrize(
    ("reason", "says"),
    [
        ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed", "PULSAR_LENS_CA_BUNDLE"),
        (
            "[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] tlsv13 alert certificate required",
            "PULSAR_LENS_TLS_CERT_FILE and PULSAR_LENS_TLS_KEY_FILE",
        ),
        ("[SSL: WRONG_VERSION_NUMBER] wrong version number", "does not speak TLS"),
    ],
)
def test_admin_client_tls_failure_names_what_to_fix(reason: str, says: str) -> None:
    with responses.RequestsMock() as mock:
        mock.get(f"{BASE}/admin/v2/clusters", body=requests.exceptions.SSLError(reason))
        with pytest.raises(AdminApiUnreachable) as caught:
            AdminClient(BASE, retries=0).get_json("/admin/v2/clusters")
    assert says in str(caught.value)


def test_admin_client_certificate_refused_after_the_handshake_is_not_retried() -> None:
    """TLS 1.3 reports a missing client certificate on the first read: a connection error."""
    with responses.RequestsMock() as mock:
        refused = requests.ConnectionError("SSLError tlsv13 alert certificate required")
        mock.get(f"{BASE}/admin/v2/clusters", body=refused)
        with pytest.raises(AdminApiUnreachable, match="PULSAR_LENS_TLS_CERT_FILE"):
            AdminClient(BASE, retries=3, backoff=0).get_json("/admin/v2/clusters")
        assert len(mock.calls) == 1
