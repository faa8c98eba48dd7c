"""OAuth2 client credentials, the admin client's new auth settings and their hints, the
binary client's auth from the same settings. The live proof is tests/live/test_security_live.py."""

from __future__ import annotations

import base64
import json
import logging
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pulsar
import pytest
import responses

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.client_auth import client_auth_from_env, client_options_from_env
from pulsar_lens.collectors.oauth2 import (
    WELL_KNOWN,
    ClientCredentialsFlow,
    Credentials,
    OAuth2Error,
    jwt_claims,
    read_credentials,
    token_expired_at,
)
from pulsar_lens.core import secrets
from pulsar_lens.core.errors import AdminApiError, CollectorError
from pulsar_lens.core.secrets import Secret, redact
from tests.fake_admin import FakeAdmin, Seen

ISSUER = "https://issuer.example"
TOKEN_URL = f"{ISSUER}/oauth/token"
BASE = "http://broker-0:8080"
SECRET = "MRKcs-unit-Q7p3"
CREDS = {"client_id": "lens", "client_secret": SECRET, "issuer_url": ISSUER}


def jwt_of(claims: dict[str, object]) -> str:
    def part(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


@pytest.fixture
def issuer() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.get(f"{ISSUER}/.well-known/openid-configuration", json={"token_endpoint": TOKEN_URL})
        yield mock


def grant(mock: responses.RequestsMock, token: str, expires_in: int = 100) -> None:
    mock.post(TOKEN_URL, json={"access_token": token, "expires_in": expires_in})


def form(call: responses.Call) -> dict[str, str]:
    body = call.request.body
    text = body.decode() if isinstance(body, bytes) else str(body)
    return dict(urllib.parse.parse_qsl(text))


def flow(clock: list[float] | None = None, **kwargs: object) -> ClientCredentialsFlow:
    now = clock or [1000.0]
    creds = Credentials("lens", Secret(SECRET), ISSUER)
    return ClientCredentialsFlow(creds, clock=lambda: now[0], **kwargs)  # type: ignore[arg-type]


# --- credentials ---------------------------------------------------------------------


@pytest.mark.parametrize("form_", ["path", "file-url", "data-base64", "data-percent"])
def test_read_credentials_accepts_what_pulsar_accepts(tmp_path: Path, form_: str) -> None:
    path = tmp_path / "creds.json"
    path.write_text(json.dumps(CREDS))
    text = json.dumps(CREDS)
    ref = {
        "path": str(path),
        "file-url": path.as_uri(),
        "data-base64": "data:application/json;base64," + base64.b64encode(text.encode()).decode(),
        "data-percent": "data:application/json," + urllib.parse.quote(text),
    }[form_]
    creds = read_credentials(ref)
    assert (creds.client_id, creds.client_secret.reveal(), creds.issuer_url) == (
        "lens",
        SECRET,
        ISSUER,
    )
    assert redact(f"x {SECRET} y") == "x *** y"


def test_read_credentials_errors_name_the_setting_not_the_content(tmp_path: Path) -> None:
    path = tmp_path / "creds.json"
    path.write_text(json.dumps({"client_id": "lens", "secret": SECRET}))
    with pytest.raises(OAuth2Error, match="PULSAR_LENS_OAUTH2_PRIVATE_KEY") as caught:
        read_credentials(str(path))
    assert SECRET not in str(caught.value)
    with pytest.raises(OAuth2Error, match="cannot read"):
        read_credentials(str(tmp_path / "missing.json"))


# --- the flow ------------------------------------------------------------------------


def test_flow_fetches_once_and_sends_the_client_credentials_grant(
    issuer: responses.RequestsMock,
) -> None:
    grant(issuer, "tok-1")
    f = flow(audience="urn:pulsar", scope="admin")
    assert f.token().reveal() == "tok-1"
    assert f.token().reveal() == "tok-1"
    posts = [c for c in issuer.calls if c.request.method == "POST"]
    assert len(posts) == 1 and f.fetches == 1
    assert form(posts[0]) == {
        "grant_type": "client_credentials",
        "client_id": "lens",
        "client_secret": SECRET,
        "audience": "urn:pulsar",
        "scope": "admin",
    }


def test_flow_refreshes_a_quarter_of_the_lifetime_before_expiry(
    issuer: responses.RequestsMock,
) -> None:
    clock = [1000.0]
    grant(issuer, "tok-1", expires_in=20)
    f = flow(clock)
    assert f.token().reveal() == "tok-1"
    issuer.replace(responses.POST, TOKEN_URL, json={"access_token": "tok-2", "expires_in": 20})
    clock[0] += 14.9
    assert f.token().reveal() == "tok-1"
    clock[0] += 0.2  # 15.1 s of 20: inside the last quarter
    assert f.token().reveal() == "tok-2"
    assert f.fetches == 2


def test_flow_takes_the_lifetime_from_the_jwt_without_expires_in(
    issuer: responses.RequestsMock,
) -> None:
    clock = [1000.0]
    issuer.post(TOKEN_URL, json={"access_token": jwt_of({"sub": "lens", "exp": 1400})})
    f = flow(clock)
    f.token()
    clock[0] += 339  # lifetime 400 s, refreshed min(60, 100) s early
    f.token()
    clock[0] += 2
    f.token()
    assert f.fetches == 2


def test_flow_refusal_is_remembered_briefly_and_never_shows_the_secret(
    issuer: responses.RequestsMock,
) -> None:
    clock = [1000.0]
    issuer.post(
        TOKEN_URL,
        status=401,
        json={"error": "invalid_client", "error_description": f"bad secret {SECRET}"},
    )
    f = flow(clock)
    for _ in range(3):
        with pytest.raises(OAuth2Error) as caught:
            f.token()
        assert "invalid_client" in str(caught.value) and SECRET not in str(caught.value)
        assert "PULSAR_LENS_OAUTH2_PRIVATE_KEY" in str(caught.value)
    assert len([c for c in issuer.calls if c.request.method == "POST"]) == 1
    clock[0] += 6
    with pytest.raises(OAuth2Error):
        f.token()
    assert len([c for c in issuer.calls if c.request.method == "POST"]) == 2


def test_flow_unreachable_issuer_names_the_issuer_setting() -> None:
    creds = Credentials("lens", Secret(SECRET), "http://127.0.0.1:9")
    with pytest.raises(OAuth2Error, match="PULSAR_LENS_OAUTH2_ISSUER_URL"):
        ClientCredentialsFlow(creds, timeout=2).token()


def test_flow_forgets_a_replaced_token_once_it_expired(issuer: responses.RequestsMock) -> None:
    clock = [1000.0]
    grant(issuer, "old-token-123", expires_in=10)
    f = flow(clock)
    f.token()
    issuer.replace(responses.POST, TOKEN_URL, json={"access_token": "new-token-456"})
    clock[0] += 11
    f.token()
    assert redact("old-token-123 new-token-456") == "old-token-123 ***"


# --- JWT helpers ---------------------------------------------------------------------


def test_token_expired_at_reads_exp_without_verifying() -> None:
    assert jwt_claims(jwt_of({"sub": "a"})) == {"sub": "a"}
    assert jwt_claims("not-a-jwt") == {}
    assert token_expired_at(jwt_of({"exp": time.time() + 60})) is None
    expired = token_expired_at(jwt_of({"exp": 1_700_000_000}))
    assert expired is not None and expired.year == 2023


# --- the admin client ----------------------------------------------------------------


def test_admin_client_sends_the_flows_token_and_refetches_after_a_401(
    issuer: responses.RequestsMock,
) -> None:
    grant(issuer, "tok-1")
    issuer.get(f"{BASE}/admin/v2/clusters", status=401, body="Authentication required")
    client = AdminClient(BASE, oauth2=flow(), retries=0)
    with pytest.raises(AdminApiError, match="OAuth2 access token") as caught:
        client.get_json("/admin/v2/clusters")
    assert "tok-1" not in str(caught.value)
    assert issuer.calls[-1].request.headers["Authorization"] == "Bearer tok-1"
    issuer.replace(responses.POST, TOKEN_URL, json={"access_token": "tok-2", "expires_in": 100})
    issuer.replace(responses.GET, f"{BASE}/admin/v2/clusters", json=["standalone"])
    assert client.get_json("/admin/v2/clusters") == ["standalone"]
    assert issuer.calls[-1].request.headers["Authorization"] == "Bearer tok-2"


def test_a_netrc_entry_never_replaces_the_flows_token(
    issuer: responses.RequestsMock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine {urlsplit(BASE).hostname} login reader password netrc-secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    grant(issuer, "tok-1")
    issuer.get(f"{BASE}/admin/v2/clusters", json=["standalone"])
    assert AdminClient(BASE, oauth2=flow()).get_json("/admin/v2/clusters") == ["standalone"]
    assert issuer.calls[-1].request.headers["Authorization"] == "Bearer tok-1"


def test_admin_client_from_env_builds_oauth2_only_without_a_token(tmp_path: Path) -> None:
    path = tmp_path / "creds.json"
    path.write_text(json.dumps(CREDS))
    env = {"PULSAR_ADMIN_URL": BASE, "PULSAR_LENS_OAUTH2_PRIVATE_KEY": path.as_uri()}
    assert repr(AdminClient.from_env(env)) == f"AdminClient('{BASE}', oauth2)"
    with_token = {**env, "PULSAR_ADMIN_TOKEN": "abcd-token"}
    assert repr(AdminClient.from_env(with_token)) == f"AdminClient('{BASE}', token)"


def test_admin_client_refused_token_hints(monkeypatch: pytest.MonkeyPatch) -> None:
    expired = jwt_of({"sub": "lens-admin", "exp": 1_700_000_000})
    role = jwt_of({"sub": "team-a-admin"})
    with responses.RequestsMock() as mock:
        mock.get(f"{BASE}/a", status=401, body="<html>Authentication required</html>")
        mock.get(
            f"{BASE}/b",
            status=401,
            json={"reason": "Unauthorized to validateTenantOperation for clientAppId [x]"},
        )
        with pytest.raises(AdminApiError, match="expired at 2023-11-14T22:13:20Z"):
            AdminClient(BASE, token=expired).get_json("/a")
        with pytest.raises(AdminApiError, match=r"forbidden: .* \(role 'team-a-admin'\)"):
            AdminClient(BASE, token=role).get_json("/b")


def test_admin_client_client_certificate_needs_both_files(tmp_path: Path) -> None:
    cert = tmp_path / "c.pem"
    cert.write_text("x")
    with pytest.raises(CollectorError, match="PULSAR_LENS_TLS_KEY_FILE"):
        AdminClient(BASE, cert_file=cert)
    with pytest.raises(CollectorError, match="fix PULSAR_LENS_TLS_KEY_FILE"):
        AdminClient(BASE, cert_file=cert, key_file=tmp_path / "missing.pem")
    made = AdminClient(BASE, cert_file=cert, key_file=cert)
    assert made.session.cert == (str(cert), str(cert))


def test_admin_client_ca_bundle_wins_over_requests_ca_bundle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    with responses.RequestsMock() as mock:
        mock.get(f"{BASE}/x", json=[])
        AdminClient(BASE, ca_bundle="/tmp/our-ca.pem").get_json("/x")
        assert mock.calls[0].request.req_kwargs["verify"] == "/tmp/our-ca.pem"


def test_admin_client_tls_verify_off_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import pulsar_lens.collectors.admin_auth as auth

    monkeypatch.setattr(auth, "_warned_unverified", auth.threading.Event())
    caplog.set_level(logging.WARNING)
    AdminClient.from_env({"PULSAR_ADMIN_URL": BASE, "PULSAR_LENS_TLS_VERIFY": "false"})
    AdminClient.from_env({"PULSAR_ADMIN_URL": BASE, "PULSAR_LENS_TLS_VERIFY": "false"})
    assert len([r for r in caplog.records if "verification is OFF" in r.getMessage()]) == 1


# --- the binary client ---------------------------------------------------------------


def test_client_auth_from_env_picks_token_then_oauth2_then_certificate(tmp_path: Path) -> None:
    path = tmp_path / "creds.json"
    path.write_text(json.dumps(CREDS))
    assert client_auth_from_env({}) is None
    assert isinstance(
        client_auth_from_env({"PULSAR_ADMIN_TOKEN": "abcd"}), pulsar.AuthenticationToken
    )
    oauth2 = {"PULSAR_LENS_OAUTH2_PRIVATE_KEY": str(path)}
    assert isinstance(client_auth_from_env(oauth2), pulsar.AuthenticationOauth2)
    cert = {"PULSAR_LENS_TLS_CERT_FILE": "c.pem", "PULSAR_LENS_TLS_KEY_FILE": "k.pem"}
    assert isinstance(client_auth_from_env(cert), pulsar.AuthenticationTLS)
    options = client_options_from_env({"PULSAR_LENS_CA_BUNDLE": "/ca.pem", **cert})
    assert options["tls_trust_certs_file_path"] == "/ca.pem"
    assert isinstance(options["authentication"], pulsar.AuthenticationTLS)


def test_secrets_forget_stops_redacting_a_value() -> None:
    secrets.register("long-gone-value")
    secrets.forget("long-gone-value")
    assert redact("long-gone-value") == "long-gone-value"


# --- a hostile issuer --------------------------------------------------------------------


DRIP_BOUND = 20  # seconds: a third of the issuer's minute of dripping, ample on a busy machine


def dripping_issuer(seen: Seen) -> tuple[int, dict[str, str], Iterator[bytes]]:
    """An issuer that answers its headers at once, then a byte every 0.2 s for a minute."""

    def drip() -> Iterator[bytes]:
        yield b"{"
        for _ in range(300):
            time.sleep(0.2)
            yield b" "

    return 200, {"Content-Type": "application/json"}, drip()


def test_flow_gives_up_on_a_trickling_issuer_at_the_callers_deadline() -> None:
    with FakeAdmin() as fake:
        fake.rule(WELL_KNOWN, dripping_issuer)
        f = ClientCredentialsFlow(Credentials("lens", Secret(SECRET), fake.url), timeout=30)
        started = time.monotonic()
        with pytest.raises(OAuth2Error, match=r"no whole answer within 1\.0s") as caught:
            f.token(deadline=started + 1.0)
        took = time.monotonic() - started
    assert took < DRIP_BOUND, f"the token fetch took {took:.1f}s past a 1 s deadline"
    assert SECRET not in str(caught.value)


def test_flow_bounds_a_trickling_answer_by_its_own_timeout_without_a_deadline() -> None:
    with FakeAdmin() as fake:
        fake.rule(WELL_KNOWN, dripping_issuer)
        f = ClientCredentialsFlow(Credentials("lens", Secret(SECRET), fake.url), timeout=1.5)
        started = time.monotonic()
        with pytest.raises(OAuth2Error, match="PULSAR_LENS_OAUTH2_ISSUER_URL"):
            f.token()
        took = time.monotonic() - started
    assert took < DRIP_BOUND, f"the token fetch took {took:.1f}s with a 1.5 s timeout"


def test_admin_call_waiting_for_a_token_stops_at_the_polls_deadline() -> None:
    with FakeAdmin() as fake:
        fake.rule(WELL_KNOWN, dripping_issuer)
        f = ClientCredentialsFlow(Credentials("lens", Secret(SECRET), fake.url), timeout=30)
        client = AdminClient(fake.url, oauth2=f, retries=0, timeout=30)
        client.deadline = time.monotonic() + 1.5
        started = time.monotonic()
        with pytest.raises(OAuth2Error, match="no whole answer"):
            client.get_json("/admin/v2/clusters")
        took = time.monotonic() - started
        assert not fake.seen("/admin/v2/clusters"), "the call went out without a token"
    assert took < DRIP_BOUND, f"the call took {took:.1f}s past a 1.5 s poll deadline"


EXPIRED = {"negative": -100, "zero": 0, "negative-fraction": -0.5, "negative-text": "-100"}


@pytest.mark.parametrize("expires_in", EXPIRED.values(), ids=list(EXPIRED))
def test_flow_refuses_a_token_the_issuer_says_is_already_expired(
    issuer: responses.RequestsMock, caplog: pytest.LogCaptureFixture, expires_in: object
) -> None:
    caplog.set_level(logging.INFO)
    issuer.post(TOKEN_URL, json={"access_token": "tok-expired", "expires_in": expires_in})
    with pytest.raises(OAuth2Error, match=r"already expired \(expires_in "):
        flow().token()
    assert not [r for r in caplog.records if "valid" in r.getMessage()]


LIFETIMES = {  # expires_in as the issuer sent it: the lifetime used, what the log says
    "number": (120, 120.0, "valid 120s (expires_in 120)"),
    "digits-text": ("120", 120.0, 'valid 120s (expires_in "120")'),
    "absurd": (10**12, 86400.0, "more than a day: refreshed after 86400s"),
    "infinite": (float("inf"), 86400.0, "more than a day: refreshed after 86400s"),
    "nan": (float("nan"), 3600.0, "is not a number of seconds: 3600s assumed"),
    "words": ("soon", 3600.0, "is not a number of seconds: 3600s assumed"),
    "boolean": (True, 3600.0, "is not a number of seconds: 3600s assumed"),
    "absent": (None, 3600.0, "the issuer said not for how long: 3600s assumed"),
}


@pytest.mark.parametrize("case", LIFETIMES)
def test_flow_logs_the_lifetime_the_issuer_gave_truthfully(
    issuer: responses.RequestsMock, caplog: pytest.LogCaptureFixture, case: str
) -> None:
    expires_in, lifetime, said = LIFETIMES[case]
    caplog.set_level(logging.INFO)
    answer: dict[str, object] = {"access_token": "tok-life"}
    if expires_in is not None:
        answer["expires_in"] = expires_in
    issuer.post(TOKEN_URL, body=json.dumps(answer), content_type="application/json")
    clock = [1000.0]
    f = flow(clock)
    f.token()
    logged = [r.getMessage() for r in caplog.records if "new access token" in r.getMessage()]
    assert logged[0].endswith(said), logged
    clock[0] += lifetime - min(60.0, lifetime / 4) - 0.5  # just before the refresh is due
    f.token()
    assert f.fetches == 1
    clock[0] += 1.0
    f.token()
    assert f.fetches == 2


@pytest.mark.parametrize("token", ["tok\U0001f511", "caf\u00e9", "line\nbreak", "zero\u200bw"])
def test_flow_refuses_an_access_token_no_header_can_carry(
    issuer: responses.RequestsMock, token: str
) -> None:
    issuer.post(TOKEN_URL, json={"access_token": token, "expires_in": 100})
    with pytest.raises(OAuth2Error, match="an HTTP header cannot carry") as caught:
        flow().token()
    assert token not in str(caught.value)
