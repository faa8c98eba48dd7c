"""pulsar_lens.core.secrets: a secret never shows itself, and clean() removes it from any text."""

from __future__ import annotations

import base64
import logging
import pickle
from urllib.parse import quote, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pulsar_lens.core.secrets import (
    RedactingFilter,
    Secret,
    clean,
    display_url,
    escape_controls,
    is_credential_var,
    redact,
    register,
    split_credentials,
    without_credentials,
)
from tests.props.strategies import props
from tests.secret_forms import encodings


def test_a_secret_never_formats_its_value() -> None:
    secret = Secret("tok-3f9a-value")
    for shown in (str(secret), repr(secret), f"{secret}", f"{secret!r}", f"{secret:>40}"):
        assert "3f9a" not in shown
    assert secret.reveal() == "tok-3f9a-value"
    assert pickle.loads(pickle.dumps(secret)) == secret


def test_a_multi_line_secret_is_removed_whole_and_line_by_line() -> None:
    Secret("first-line-abc\nsecond-line-def")
    text = "saw first-line-abc\nsecond-line-def then second-line-def alone, first-line-abc too"
    assert "line-abc" not in redact(text) and "line-def" not in redact(text)


def test_bearer_basic_and_url_userinfo_are_removed_even_when_unknown() -> None:
    text = "Authorization: Bearer abc.def-ghi; Basic dXNlcjpwdw==; http://u:p@host:8080/x"
    assert redact(text) == "Authorization: Bearer ***; Basic ***; http://***@host:8080/x"


def test_url_credentials_are_split_out_and_their_basic_form_registered() -> None:
    url, user, password = split_credentials("http://admin:S3cr%40t-pw@broker:8080/base")
    assert (url, user) == ("http://broker:8080/base", "admin")
    assert password is not None and password.reveal() == "S3cr@t-pw"
    echoed = base64.b64encode(b"admin:S3cr@t-pw").decode()
    assert echoed not in clean(f"header was {echoed}")
    assert display_url("https://a:b@h:1") == "https://h:1"


def test_clean_escapes_controls_after_redacting_and_cuts_after_redacting() -> None:
    Secret("token-straddling-the-cut")
    assert escape_controls("a\nb\r\x1bc\u2028") == "a\\nb\\r\\x1bc\\u2028"
    cut = clean("x" * 10 + "token-straddling-the-cut", limit=14)
    assert cut == "xxxxxxxxxx***"  # redacted first, so nothing was left to cut


def test_secrets_are_redacted_in_log_records(caplog: pytest.LogCaptureFixture) -> None:
    Secret("logged-secret-value")
    logger = logging.getLogger("test.secrets")
    handler = logging.StreamHandler()
    handler.addFilter(RedactingFilter())
    record = logger.makeRecord(
        "test.secrets", logging.INFO, __file__, 1, "got %s\nforged", ("logged-secret-value",), None
    )
    assert handler.filter(record)
    assert record.getMessage() == "got ***\\nforged"


@given(
    secret=st.text(
        st.characters(min_codepoint=0x20, max_codepoint=0x2FFF, exclude_categories=("Cs",)),
        min_size=8,
        max_size=64,
    ).filter(lambda s: s.strip() == s),
    encoding=st.sampled_from(list(encodings("x"))),
)
@props(300)
def test_a_registered_secret_is_redacted_in_every_encoding(secret: str, encoding: str) -> None:
    register(secret)
    form = encodings(secret)[encoding]
    assert form not in redact(f"error body: <{form}> echoed")


@given(
    value=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=6, max_size=40)
)
@props(200)
def test_an_admin_url_query_keeps_its_place_and_never_shows(value: str) -> None:
    url = f"https://admin:pw-secret-1@broker:8443/prefix?apikey={quote(value, safe='')}"
    bare = split_credentials(url)[0]
    assert urlsplit(bare).query == f"apikey={quote(value, safe='')}"  # still a query
    shown = display_url(url)
    assert shown == "https://broker:8443/prefix?apikey=***"
    assert value not in redact(f"GET /admin/v2/clusters?apikey={value} failed")


def test_a_spark_connect_token_is_registered_by_the_master_and_never_shown() -> None:
    """Spark Connect carries its parameters in the URL's path (`;token=`), not in a query;
    the client sends every one it does not know as a header, so those are secrets too."""
    from pulsar_lens.core.parts import spark_master

    master = (
        "sc://spark:15002/;token=connect-tok-8812;use_ssl=true;x-api-key=gw-key-5521;user_id=ops"
    )
    assert spark_master(master) == master  # it still reaches Spark as it was given
    shown = display_url(master)
    assert shown == "sc://spark:15002/;token=***;use_ssl=true;x-api-key=***;user_id=ops"
    said = redact(f"UNAVAILABLE: failed to connect to {master}")
    assert "connect-tok-8812" not in said and "gw-key-5521" not in said
    assert "use_ssl=true" in said and "user_id=ops" in said  # Spark's own plain parameters
    assert is_credential_var("PULSAR_LENS_SPARK_MASTER", master)
    assert display_url("sc://spark:15002") == "sc://spark:15002"
    assert display_url("sc://spark:15002/;use_ssl") == "sc://spark:15002/;use_ssl"


CREDENTIAL_ENV = {
    "PULSAR_ADMIN_TOKEN": "tok-1234",
    "PULSAR_ADMIN_TOKEN_FILE": "/run/secrets/token",
    "PULSAR_CLIENT_TOKEN": "tok-5678",
    "PULSAR_CLIENT_TOKEN_FILE": "/run/secrets/client",
    "PULSAR_LENS_OAUTH2_PRIVATE_KEY": "/run/secrets/oauth2.json",
    "PULSAR_LENS_OAUTH2_ISSUER_URL": "https://issuer.example",
    "PULSAR_LENS_OAUTH2_AUDIENCE": "urn:pulsar",
    "PULSAR_LENS_OIDC_CLIENT_SECRET": "login-secret",
    "PULSAR_LENS_OIDC_COOKIE_SECRET": "cookie-secret",
    "PULSAR_LENS_CONFIG": "/etc/pulsar-lens.toml",
    "PULSAR_LENS_TLS_KEY_FILE": "/run/secrets/client.key",
    "PULSAR_ADMIN_URL": "http://ops:pw@broker:8080",
    "PULSAR_SERVICE_URL": "pulsar://broker:6650/?token=abcd",
    "HTTPS_PROXY": "http://user:pass@proxy:3128",
    "ACME_API_KEY": "k-123456",
}
PLAIN_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/lens",
    "PULSAR_LENS_PLUGIN_DIRS": "/plugins",
    "PULSAR_LENS_STORE": "/var/store",
    "PULSAR_LENS_SPARK_MASTER": "spark://spark:7077",
    "PULSAR_SERVICE_URL": "pulsar://broker:6650",
    "ARROW_DEFAULT_MEMORY_POOL": "system",
}


@pytest.mark.parametrize(("name", "value"), CREDENTIAL_ENV.items())
def test_every_credential_variable_is_kept_from_plugin_workers(name: str, value: str) -> None:
    assert is_credential_var(name, value)
    kept = without_credentials({**PLAIN_ENV, name: value})
    assert name not in kept and value not in kept.values()


@pytest.mark.parametrize(("name", "value"), PLAIN_ENV.items())
def test_plain_settings_still_reach_plugin_workers(name: str, value: str) -> None:
    assert not is_credential_var(name, value)


def test_a_variable_holding_a_registered_secret_is_kept_from_plugin_workers() -> None:
    Secret("MRK-held-by-an-odd-name")
    assert is_credential_var("SOME_SETTING", "prefix MRK-held-by-an-odd-name")
