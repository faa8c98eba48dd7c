"""Secured access against one real Pulsar 4.0 standalone with authentication and
authorization on: token (made by the broker's own tool), OAuth2 client credentials from a
loopback issuer, TLS with a CA of our own and a client certificate the broker requires.

One broker for the whole module: token provider (RS256; the superuser's token is made by the
broker's token tool, the others by PyJWT with the same key) and TLS provider (client
certificate CN = role), superusers `lens-admin`, `lens-oauth` and the broker's own role, web
service on TLS with tlsRequireTrustedClientCertOnConnect=true.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pulsar as pulsar_client
import pytest
import requests
from streamlit.testing.v1 import AppTest

import pulsar_lens.collectors.admin_auth as admin_auth
from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.client_auth import client_auth_from_env
from pulsar_lens.collectors.poll import poll
from pulsar_lens.core.model import Snapshot
from pulsar_lens.core.store import Store
from pulsar_lens.dashboard import frames
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.lab.security import (
    BROKER_ROLE,
    CertFiles,
    CertificateAuthority,
    LoopbackIssuer,
    TokenKeys,
    foreign_token,
    secured_settings,
)
from tests.cli.test_secret_marker import metrics_text, store_text
from tests.lens_cli import run_lens

SUPERUSER = "lens-admin"
OAUTH_CLIENT = "lens-oauth"
OAUTH_SECRET = "MRKcs-Vb7n2q-Lp5"  # also a marker the secrets test greps for
TOKEN_LIFETIME = 20.0
SLOW = ("no answer within", "still arriving", "deadline")  # a loaded machine's timeouts
APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


@dataclass
class Secured:
    broker: LocalPulsar
    keys: TokenKeys
    token: str  # the superuser's, made by the broker's token tool
    ca: CertificateAuthority
    other_ca: CertificateAuthority
    client_cert: CertFiles
    issuer: LoopbackIssuer
    folder: Path

    def env(self, **extra: str) -> dict[str, str]:
        return {"PULSAR_ADMIN_URL": self.broker.admin_url, **extra}

    def oauth2_env(self, credentials: Path) -> dict[str, str]:
        return self.env(
            PULSAR_LENS_OAUTH2_ISSUER_URL=self.issuer.url,
            PULSAR_LENS_OAUTH2_PRIVATE_KEY=credentials.as_uri(),
            PULSAR_LENS_OAUTH2_AUDIENCE="urn:pulsar:standalone",
        )

    def tls_env(self, *, ca: CertificateAuthority | None = None) -> dict[str, str]:
        return {
            "PULSAR_ADMIN_URL": self.broker.admin_url_tls,
            "PULSAR_LENS_CA_BUNDLE": str((ca or self.ca).bundle),
            "PULSAR_LENS_TLS_CERT_FILE": str(self.client_cert.cert),
            "PULSAR_LENS_TLS_KEY_FILE": str(self.client_cert.key),
        }


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    folder = tmp_path_factory.mktemp("secured")
    # the key pair in the tool's format; the superuser's token comes from the tool, from it
    keys = TokenKeys.generate(folder)
    broker_token = keys.sign(BROKER_ROLE)
    ca = CertificateAuthority.create(folder, "lens-test")
    settings = secured_settings(
        keys,
        super_users=(SUPERUSER, OAUTH_CLIENT),
        broker_token=broker_token,
        ca=ca,
        server=ca.issue("127.0.0.1", server=True),
        require_client_cert=True,
    )
    broker = LocalPulsar(settings=settings, admin_token=broker_token, web_tls=True)
    issuer = LoopbackIssuer(keys, {OAUTH_CLIENT: OAUTH_SECRET}, lifetime=TOKEN_LIFETIME).start()
    try:
        with ThreadPoolExecutor(1) as pool:  # the tool's JVM runs while the broker starts
            tool_token = pool.submit(keys.tool_token, SUPERUSER)
            broker.start(timeout=240)
            token = tool_token.result(timeout=120)
        headers = {"Authorization": f"Bearer {token}"}
        for path, body in (
            ("tenants/team-a", {"adminRoles": ["team-a-admin"], "allowedClusters": ["standalone"]}),
            ("namespaces/team-a/ns1", None),
        ):
            resp = requests.put(
                f"{broker.admin_url}/admin/v2/{path}", json=body, headers=headers, timeout=30
            )
            assert resp.status_code in (200, 204), resp.text
        yield Secured(
            broker,
            keys,
            token,
            ca,
            CertificateAuthority.create(folder / "other", "unknown"),
            ca.issue(SUPERUSER, server=False),
            issuer,
            folder,
        )
    finally:
        issuer.stop()
        broker.stop()


def collect(store: Path, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    """`pulsar-lens collect --once` in a subprocess: exit code, stdout, stderr."""
    done = run_lens("collect", "--once", "--store", str(store), *args, env=env, timeout=300)
    return done.returncode, done.stdout, done.stderr


def snapshot_of(env: dict[str, str]) -> Snapshot:
    with AdminClient.from_env(env) as client:
        return poll(client, timeout=30.0)


def refused(snap: Snapshot) -> list[str]:
    """The errors that are refusals of our credentials (a slow answer on a loaded machine
    may still time out: that is not what these tests are about)."""
    return [e.message for e in snap.errors if e.status in (401, 403) or "OAuth2" in e.message]


# --- token ---------------------------------------------------------------------------


def test_secured_broker_refuses_anonymous_and_collect_works_with_the_tool_token(
    secured: Secured, tmp_path: Path
) -> None:
    anonymous = requests.get(f"{secured.broker.admin_url}/admin/v2/clusters", timeout=10)
    assert anonymous.status_code == 401
    code, out, err = collect(tmp_path / "store", secured.env(PULSAR_ADMIN_TOKEN=secured.token))
    assert code == 0, err
    # every call was let in (on a loaded machine a slow answer may still time out)
    errors = frames.parse_errors(Store(tmp_path / "store").snapshots().iloc[-1]["errors_json"])
    assert not errors["status"].isin([401, 403]).any(), errors.to_string()
    bundles = Store(tmp_path / "store").read_latest("bundles").to_pandas()
    assert {"public/default", "team-a/ns1"} <= set(bundles["namespace"])
    assert secured.token not in out + err


@pytest.mark.parametrize("kind", ["wrong-key", "expired"])
def test_a_refused_token_is_one_clear_error_and_a_failed_exit(
    secured: Secured, tmp_path: Path, kind: str
) -> None:
    if kind == "wrong-key":
        token, says = foreign_token(SUPERUSER), "could not authenticate it"
    else:
        token, says = secured.keys.sign(SUPERUSER, expires_at=time.time() - 60), "expired at"
    code, out, err = collect(tmp_path / "store", secured.env(PULSAR_ADMIN_TOKEN=token))
    assert code == 1
    assert "Traceback" not in err
    final = [line for line in err.splitlines() if line.startswith("pulsar-lens collect:")]
    assert len(final) == 1, err
    assert "returned 401" in final[0] and says in final[0] and "PULSAR_ADMIN_TOKEN" in final[0]
    assert token not in out + err


def test_a_tenant_admin_gets_a_partial_snapshot_that_names_what_was_forbidden(
    secured: Secured, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant_admin = secured.keys.sign("team-a-admin")
    store = tmp_path / "store"
    env = secured.env(PULSAR_ADMIN_TOKEN=tenant_admin)
    code, _, err = collect(store, env, "--namespace", "team-a/ns1")
    assert code == 0, err
    index = Store(store).snapshots()
    status = frames.compute_poll_status(index, now=dt.datetime.now(dt.UTC), interval_seconds=30)
    assert status is not None and status.partial
    errors = status.errors
    forbidden = errors[errors["status"] == 401]  # Pulsar refuses permissions with 401
    assert len(forbidden) > 0
    assert all("forbidden" in m and "team-a-admin" in m for m in forbidden["message"])
    # what it may read was read: its own namespace; what it may not is named
    assert "team-a/ns1" in set(Store(store).read_latest("bundles").to_pandas()["namespace"])
    assert any("broker-stats" in e or "brokers" in e for e in forbidden["endpoint"])
    monkeypatch.setenv("PULSAR_LENS_STORE", str(store))
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception
    assert any("partial" in w.value for w in at.warning)
    shown = "\n".join(d.value.to_csv() for d in at.dataframe)
    assert "forbidden" in shown and "401" in shown


# --- OAuth2 --------------------------------------------------------------------------


def test_oauth2_token_is_cached_refreshed_before_expiry_and_collect_keeps_working(
    secured: Secured,
) -> None:
    credentials = secured.issuer.credentials(secured.folder, OAUTH_CLIENT)
    before = len(secured.issuer.grants)
    with AdminClient.from_env(secured.oauth2_env(credentials)) as client:
        first = poll(client, timeout=30.0)
        assert refused(first) == [] and first.records("bundles")
        assert len(secured.issuer.grants) == before + 1  # one token for all the poll's calls
        granted = secured.issuer.grants[-1]
        refresh_due = granted.issued_at + TOKEN_LIFETIME * 3 / 4
        time.sleep(max(0.0, refresh_due - time.time()) + 0.5)
        second = poll(client, timeout=30.0)
    assert refused(second) == [] and second.records("bundles")
    grants = secured.issuer.grants[before:]
    assert len(grants) == 2
    assert grants[1].issued_at < grants[0].expires_at  # fetched before the first expired
    assert secured.issuer.requests[-1]["audience"] == "urn:pulsar:standalone"


def test_oauth2_pulsar_client_authenticates_through_the_same_settings(secured: Secured) -> None:
    """A lookup needs an authenticated connection (anonymous ones are refused): it answers
    for the `AuthenticationOauth2` our settings make, which runs the same flow itself."""
    credentials = secured.issuer.credentials(secured.folder, OAUTH_CLIENT)
    topic = "persistent://public/default/lens-oauth2-probe"
    asked = len(secured.issuer.grants)
    auth = client_auth_from_env(secured.oauth2_env(credentials))
    client = pulsar_client.Client(
        secured.broker.service_url, authentication=auth, operation_timeout_seconds=60
    )
    try:
        assert client.get_topic_partitions(topic) == [topic]
    finally:
        client.close()
    assert len(secured.issuer.grants) > asked  # the client library asked our issuer


def test_oauth2_refused_client_is_named_once_per_poll_without_its_secret(
    secured: Secured, caplog: pytest.LogCaptureFixture
) -> None:
    credentials = secured.issuer.credentials(secured.folder, "lens-wrong", "MRKcs-wrong-9x")
    caplog.set_level(logging.DEBUG)
    asked = len(secured.issuer.requests)
    snap = snapshot_of(secured.oauth2_env(credentials))
    assert snap.errors and not snap.records("bundles")
    assert all("PULSAR_LENS_OAUTH2_PRIVATE_KEY" in e.message for e in snap.errors)
    assert all("invalid_client" in e.message for e in snap.errors)
    assert len(secured.issuer.requests) - asked == 1  # a refusal is remembered, not re-asked
    texts = [e.message for e in snap.errors] + [r.getMessage() for r in caplog.records]
    assert not [t for t in texts if "MRKcs-wrong-9x" in t]


# --- TLS -----------------------------------------------------------------------------


def test_tls_collect_verifies_the_ca_and_the_client_certificate_is_the_identity(
    secured: Secured,
) -> None:
    snap = snapshot_of(secured.tls_env())  # no token: the certificate is the identity
    assert {"public/default", "team-a/ns1"} <= {b.namespace for b in snap.records("bundles")}
    # the broker lists itself by its plain-HTTP port; the per-broker calls go to its TLS port
    failed = [e for e in snap.errors if not any(t in e.message for t in SLOW)]
    assert failed == [], failed
    assert snap.records("brokers") and all(b.version for b in snap.records("brokers"))


def test_tls_unknown_ca_fails_with_one_clear_error(secured: Secured, tmp_path: Path) -> None:
    env = secured.tls_env(ca=secured.other_ca)
    code, _, err = collect(tmp_path / "store", env)
    assert code == 1 and "Traceback" not in err
    final = [line for line in err.splitlines() if line.startswith("pulsar-lens collect:")]
    assert len(final) == 1, err
    assert "CERTIFICATE_VERIFY_FAILED" in final[0] and "PULSAR_LENS_CA_BUNDLE" in final[0]


def test_tls_without_a_client_certificate_says_which_settings_to_set(secured: Secured) -> None:
    env = secured.tls_env()
    del env["PULSAR_LENS_TLS_CERT_FILE"], env["PULSAR_LENS_TLS_KEY_FILE"]
    snap = snapshot_of({**env, "PULSAR_ADMIN_TOKEN": secured.token})
    assert snap.errors and not snap.records("bundles")
    assert all("PULSAR_LENS_TLS_CERT_FILE" in e.message for e in snap.errors)


def test_tls_verify_off_works_but_warns_once(
    secured: Secured, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(admin_auth, "_warned_unverified", admin_auth.threading.Event())
    env = {**secured.tls_env(ca=secured.other_ca), "PULSAR_LENS_TLS_VERIFY": "false"}
    caplog.set_level(logging.WARNING, logger="pulsar_lens.collectors.admin_auth")
    for _ in range(2):
        with AdminClient.from_env(env) as client:
            assert client.get_json("/admin/v2/clusters") == ["standalone"]
    warnings = [r.getMessage() for r in caplog.records if "verification is OFF" in r.getMessage()]
    assert len(warnings) == 1


# --- secrets -------------------------------------------------------------------------


def test_no_marker_secret_reaches_any_output_after_successes_and_failures(
    secured: Secured, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    password = "MRKpw-Tt3r8s-Wq2"
    store = tmp_path / "store"
    with_password = secured.broker.admin_url.replace("//", f"//lens:{password}@")
    (tmp_path / "bad").mkdir()
    wrong_secret = secured.issuer.credentials(tmp_path / "bad", OAUTH_CLIENT, "MRKcs-bad-0Zk4")
    good_oauth2 = secured.issuer.credentials(tmp_path, OAUTH_CLIENT)
    nobody = secured.keys.sign("nobody")
    runs = [
        {"PULSAR_ADMIN_URL": with_password, "PULSAR_ADMIN_TOKEN": secured.token},  # works
        secured.oauth2_env(wrong_secret),  # the issuer refuses, echoing the secret
        secured.oauth2_env(good_oauth2),  # works
        secured.env(PULSAR_ADMIN_TOKEN=nobody),  # the broker refuses the role
    ]
    outputs: list[str] = []
    caplog.set_level(logging.DEBUG)
    for env, expected in zip(runs[:2], (0, 1), strict=True):  # the CLI, as a user runs it
        code, out, err = collect(store, env)
        assert code == expected, err
        outputs += [out, err]
    for env in runs:  # the poll the CLI runs, stored failures included
        snap = snapshot_of(env)
        Store(store).write(snap)
        outputs += [e.message for e in snap.errors]
    joined = "\n".join(outputs)
    assert "invalid_client" in joined and "role 'nobody'" in joined  # the refusals were told
    outputs += [r.getMessage() for r in caplog.records]
    outputs += [store_text(store), metrics_text(Store(store))]
    markers = [secured.token, password, OAUTH_SECRET, "MRKcs-bad-0Zk4", nobody]
    markers += [g.token for g in secured.issuer.grants]
    for marker in markers:
        assert not [o for o in outputs if marker in o], marker[:12]
