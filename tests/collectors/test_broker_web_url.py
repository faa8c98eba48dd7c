"""Where the per-broker calls go: the broker's listed host and port, or over TLS its TLS port."""

from __future__ import annotations

import pytest

from pulsar_lens.collectors.brokers import broker_web_url


@pytest.mark.parametrize(
    ("broker", "admin", "expected"),
    [
        ("b1:8080", "http://b1:8080", "http://b1:8080"),
        ("b2:8080", "http://b1:8080/", "http://b2:8080"),
        ("b1:8080", "http://b1:8080/proxy/", "http://b1:8080/proxy"),
        # over TLS: brokers list their plain-HTTP port; the TLS port is the admin URL's
        ("b2:8080", "https://b1:8443", "https://b2:8443"),
        ("B1:8080", "https://b1:8443/prefix", "https://b1:8443/prefix"),
        ("b2:8080", "https://pulsar.example.com", "https://b2:443"),
        ("[::1]:8080", "https://[::1]:8443", "https://[::1]:8443"),
        ("[fe80::2]:8080", "https://[::1]:8443", "https://[fe80::2]:8443"),
    ],
)
def test_broker_web_url(broker: str, admin: str, expected: str) -> None:
    assert broker_web_url(broker, admin) == expected
