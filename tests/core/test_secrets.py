"""core.secrets: a secret never shows itself, and clean() removes it from any text."""

from __future__ import annotations

import base64
import logging
import pickle

import pytest

from core.secrets import (
    RedactingFilter,
    Secret,
    clean,
    display_url,
    escape_controls,
    redact,
    split_credentials,
)


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
