"""AdminClient's TLS failures say which setting to fix (live: tests/live/test_security_live.py)."""

from __future__ import annotations

import ssl

import pytest
import requests
import responses
import urllib3

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.core.errors import AdminApiUnreachable

BASE = "https://broker-0:8443"


def tls_failure(reason: str, kind: type[Exception] = requests.exceptions.SSLError) -> Exception:
    """The exception requests raises for a TLS failure, as it wraps it: the `ssl.SSLError`
    (with OpenSSL's reason code) beneath urllib3's, as a live handshake gives it."""
    refused = ssl.SSLError(1, f"[SSL: {reason}] {reason.lower().replace('_', ' ')}")
    refused.reason = reason
    refused.library = "SSL"
    return kind(urllib3.exceptions.ProtocolError("Connection aborted.", refused))


@pytest.mark.parametrize(
    ("reason", "says"),
    [
        ("CERTIFICATE_VERIFY_FAILED", "PULSAR_LENS_CA_BUNDLE"),
        (
            "TLSV13_ALERT_CERTIFICATE_REQUIRED",
            "PULSAR_LENS_TLS_CERT_FILE and PULSAR_LENS_TLS_KEY_FILE",
        ),
        ("SSLV3_ALERT_HANDSHAKE_FAILURE", "PULSAR_LENS_TLS_CERT_FILE and PULSAR_LENS_TLS_KEY_FILE"),
        ("WRONG_VERSION_NUMBER", "does not speak TLS"),
    ],
)
def test_admin_client_tls_failure_names_what_to_fix(reason: str, says: str) -> None:
    with responses.RequestsMock() as mock:
        mock.get(f"{BASE}/admin/v2/clusters", body=tls_failure(reason))
        with pytest.raises(AdminApiUnreachable) as caught:
            AdminClient(BASE, retries=0).get_json("/admin/v2/clusters")
    assert says in str(caught.value)


def test_admin_client_tls_hint_reads_the_reason_code_not_the_message() -> None:
    """A message that merely mentions an alert is no refused certificate."""
    with responses.RequestsMock() as mock:
        said = requests.exceptions.SSLError("tlsv13 alert certificate required, wrong version")
        mock.get(f"{BASE}/admin/v2/clusters", body=said)
        with pytest.raises(AdminApiUnreachable) as caught:
            AdminClient(BASE, retries=0).get_json("/admin/v2/clusters")
    assert "PULSAR_LENS_CA_BUNDLE" in str(caught.value)


def test_admin_client_certificate_refused_after_the_handshake_is_not_retried() -> None:
    """TLS 1.3 reports a missing client certificate on the first read: a connection error."""
    with responses.RequestsMock() as mock:
        refused = tls_failure("TLSV13_ALERT_CERTIFICATE_REQUIRED", requests.ConnectionError)
        mock.get(f"{BASE}/admin/v2/clusters", body=refused)
        with pytest.raises(AdminApiUnreachable, match="PULSAR_LENS_TLS_CERT_FILE"):
            AdminClient(BASE, retries=3, backoff=0).get_json("/admin/v2/clusters")
        assert len(mock.calls) == 1
