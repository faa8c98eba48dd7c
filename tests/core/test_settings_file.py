"""The TOML settings file beside the environment: precedence, origins, every error, masking."""

from __future__ import annotations

import dataclasses
import datetime as dt
import textwrap
from pathlib import Path

import pytest

from pulsar_lens.core.config import CLUSTER_ENV, MASKED, ClusterSettings, show
from pulsar_lens.core.configfile import Origin, key_lines, load
from pulsar_lens.core.errors import SettingsError
from pulsar_lens.core.secrets import Secret
from pulsar_lens.core.settings import Settings

TWO_CLUSTERS = """\
store = "/data/lens"
poll_interval = "10s"
plugin_dirs = ["/plugins", "/more"]

[[clusters]]
name = "east"
admin_url = "http://east:8080/"
service_url = "pulsar://east:6650"
token = "east-token-value"
trusted_origins = ["cluster"]

[[clusters]]
name = "west"
admin_url = "https://west:8443"
token_file = "/run/west-token"
[clusters.tls]
ca_bundle = "/etc/ca.pem"
verify = false
cert_file = "/etc/client.pem"
key_file = "/etc/client.key"
[clusters.oauth2]
issuer_url = "https://auth.example/"
audience = "urn:pulsar"
private_key = "file:///etc/creds.json"
scope = "admin"
"""


def write(tmp_path: Path, text: str, name: str = "lens.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error_of(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(SettingsError) as info:
        load(env or {}, config=write(tmp_path, text))
    return str(info.value)


def test_file_sets_every_key_of_several_clusters(tmp_path: Path) -> None:
    settings = Settings.from_env({}, config=write(tmp_path, TWO_CLUSTERS))
    assert settings.store_dir == Path("/data/lens")
    assert settings.poll_interval == dt.timedelta(seconds=10)
    assert settings.plugin_dirs == (Path("/plugins"), Path("/more"))
    east, west = settings.clusters
    assert (east.name, east.admin_url, east.service_url) == (
        "east",
        "http://east:8080",
        "pulsar://east:6650",
    )
    assert east.token == Secret("east-token-value") and east.trusted_origins == ("cluster",)
    assert west.tls.verify is False and west.tls.ca_bundle == Path("/etc/ca.pem")
    assert west.oauth2.issuer_url == "https://auth.example"
    assert west.oauth2.private_key == Secret("file:///etc/creds.json")
    # with several clusters, the single-cluster fields name none of them
    assert settings.admin_url is None and settings.admin_token is None
    assert settings.config_file == tmp_path / "lens.toml"


def test_environment_wins_over_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, 'poll_interval = "10s"\nretention = "1d"\nkey_sampling = true\n')
    env = {"PULSAR_LENS_POLL_INTERVAL": "2m", "PULSAR_LENS_KEY_SAMPLING": "off"}
    loaded = load(env, config=path)
    assert loaded.config.poll_interval == dt.timedelta(minutes=2)
    assert loaded.config.retention == dt.timedelta(days=1)
    assert loaded.config.key_sampling is False
    assert loaded.origin("poll_interval") == Origin("env", "PULSAR_LENS_POLL_INTERVAL")
    assert loaded.origin("retention") == Origin("file", "lens.toml line 2")
    assert loaded.origin("spark_master") == Origin("default")


def test_config_file_comes_from_the_environment_unless_given(tmp_path: Path) -> None:
    one = write(tmp_path, 'spark_master = "spark://one:7077"\n', "one.toml")
    two = write(tmp_path, 'spark_master = "spark://two:7077"\n', "two.toml")
    env = {"PULSAR_LENS_CONFIG": str(one)}
    assert Settings.from_env(env).spark_master == "spark://one:7077"
    assert Settings.from_env(env, config=two).spark_master == "spark://two:7077"


def test_environment_overrides_the_only_cluster_of_the_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        [[clusters]]
        name = "prod"
        admin_url = "http://file-host:8080"
        tls = { verify = false, ca_bundle = "/ca.pem" }
        """,
    )
    env = {"PULSAR_ADMIN_URL": "http://env-host:8080", "PULSAR_LENS_TLS_VERIFY": "1"}
    loaded = load(env, config=path)
    (cluster,) = loaded.config.clusters
    assert cluster.name == "prod" and cluster.admin_url == "http://env-host:8080"
    assert cluster.tls.verify is True and cluster.tls.ca_bundle == Path("/ca.pem")
    assert loaded.origin("clusters[0].admin_url") == Origin("env", "PULSAR_ADMIN_URL")
    assert loaded.origin("clusters[0].tls.ca_bundle") == Origin("file", "lens.toml line 4")
    assert Settings.from_loaded(loaded).admin_url == "http://env-host:8080"


def test_connection_variables_apply_to_no_cluster_of_several(tmp_path: Path) -> None:
    env = {"PULSAR_ADMIN_TOKEN": "stray", "PULSAR_ADMIN_URL": "http://stray:8080"}
    loaded = load(env, config=write(tmp_path, TWO_CLUSTERS))
    assert set(loaded.ignored_env) == {"PULSAR_ADMIN_TOKEN", "PULSAR_ADMIN_URL"}
    assert [c.admin_url for c in loaded.config.clusters] == [
        "http://east:8080",
        "https://west:8443",
    ]


def test_without_a_file_the_single_cluster_comes_from_the_environment() -> None:
    env = {
        "PULSAR_ADMIN_URL": "https://broker:8443/",
        "PULSAR_ADMIN_TOKEN": "t0ken",
        "PULSAR_LENS_CA_BUNDLE": "/ca.pem",
        "PULSAR_LENS_TLS_VERIFY": "false",
        "PULSAR_LENS_TLS_CERT_FILE": "/c.pem",
        "PULSAR_LENS_TLS_KEY_FILE": "/c.key",
        "PULSAR_LENS_OAUTH2_ISSUER_URL": "https://auth",
        "PULSAR_LENS_OAUTH2_AUDIENCE": "aud",
        "PULSAR_LENS_OAUTH2_PRIVATE_KEY": "/creds.json",
        "PULSAR_LENS_OAUTH2_SCOPE": "s",
        "PULSAR_LENS_TRUSTED_ORIGINS": "cluster, https://other:8443",
    }
    settings = Settings.from_env(env)
    (cluster,) = settings.clusters
    assert cluster.name is None and settings.config_file is None
    assert connection_of(cluster) == {
        "admin_url": "https://broker:8443",
        "token": "t0ken",
        "tls.ca_bundle": Path("/ca.pem"),
        "tls.verify": False,
        "tls.cert_file": Path("/c.pem"),
        "tls.key_file": Path("/c.key"),
        "oauth2.issuer_url": "https://auth",
        "oauth2.audience": "aud",
        "oauth2.private_key": "/creds.json",
        "oauth2.scope": "s",
        "trusted_origins": ("cluster", "https://other:8443"),
    }


def connection_of(cluster: ClusterSettings) -> dict[str, object]:
    """The connection keys a cluster sets (secrets revealed), by their dotted names."""
    values = {key: cluster.value(key) for key in CLUSTER_ENV}
    shown = {k: v.reveal() if isinstance(v, Secret) else v for k, v in values.items()}
    return {k: v for k, v in shown.items() if v is not None and v != () and k != "tls.verify"} | {
        "tls.verify": cluster.tls.verify
    }


def test_each_cluster_carries_only_its_own_connection(tmp_path: Path) -> None:
    east, west = load({}, config=write(tmp_path, TWO_CLUSTERS)).config.clusters
    assert connection_of(east) == {
        "admin_url": "http://east:8080",
        "service_url": "pulsar://east:6650",
        "token": "east-token-value",
        "trusted_origins": ("cluster",),
        "tls.verify": True,
    }
    assert connection_of(west) == {
        "admin_url": "https://west:8443",
        "token_file": Path("/run/west-token"),
        "tls.ca_bundle": Path("/etc/ca.pem"),
        "tls.verify": False,
        "tls.cert_file": Path("/etc/client.pem"),
        "tls.key_file": Path("/etc/client.key"),
        "oauth2.issuer_url": "https://auth.example",
        "oauth2.audience": "urn:pulsar",
        "oauth2.private_key": "file:///etc/creds.json",
        "oauth2.scope": "admin",
    }


def test_secrets_of_the_file_never_show(tmp_path: Path) -> None:
    settings = Settings.from_env({}, config=write(tmp_path, TWO_CLUSTERS))
    shown = [repr(settings), str(settings), repr(dataclasses.asdict(settings))]
    shown += [repr(c) for c in settings.clusters] + [c.model_dump_json() for c in settings.clusters]
    for text in shown:
        assert "east-token-value" not in text and "creds.json" not in text
    assert show(settings.clusters[0].token) == MASKED == "****"
    assert show("http://user:pw@host:8080") == "http://host:8080"


def test_key_lines_follow_tables_and_dotted_keys() -> None:
    lines = key_lines(TWO_CLUSTERS + 'oauth2.scope = "x"\n')
    assert lines["poll_interval"] == 2
    assert lines["clusters[0]"] == 5 and lines["clusters[0].token"] == 9
    assert lines["clusters[1].tls"] == 16 and lines["clusters[1].tls.verify"] == 18
    assert lines["clusters[1].oauth2.scope"] == 25


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('poll_interval = "soon"\n', "lens.toml line 1, poll_interval: 'soon' is not a duration"),
        ('poll_interval = "0s"\n', "lens.toml line 1, poll_interval must be longer than zero"),
        ("poll_deadline = true\n", "lens.toml line 1, poll_deadline must be a duration"),
        ('retention = "30s"\n', "lens.toml line 1, retention must be at least 1m, got 30s"),
        (
            'poll_interval = "2h"\nretention = "1h"\n',
            "lens.toml line 2, retention must be at least the poll interval (2h), got 1h",
        ),
        ('retention = "99999d"\n', "retention: '99999d' is longer than the limit of 3650d"),
        ("detail_budget = -1\n", "detail_budget must be a whole number from 0 to 100000, got -1"),
        ('key_sampling = "maybe"\n', "key_sampling must be 1 or 0 (true/false, yes/no, on/off)"),
        ("colour = 1\n", "lens.toml line 1, colour: unknown key; expected one of store,"),
        ("store = 5\n", "lens.toml line 1, store: Input is not a valid path"),
        ('clusters = "east"\n', "lens.toml line 1, clusters: Input should be a valid tuple"),
        (
            '[[clusters]]\nadmin_url = "ftp://h:1"\n',
            "lens.toml line 2, clusters[0].admin_url: 'ftp://h:1' must start with http://",
        ),
        (
            '[[clusters]]\nadmin_url = "http://h:0"\n',
            "clusters[0].admin_url: 'http://h:0' has port 0",
        ),
        ('[[clusters]]\nname = "x"\n', "lens.toml line 1, clusters[0]: admin_url is missing"),
        (
            '[[clusters]]\nadmin_url = "http://h:1"\nadmn = 1\n',
            "lens.toml line 3, clusters[0].admn: unknown key; expected one of name, admin_url",
        ),
        (
            '[[clusters]]\nadmin_url = "http://h:1"\n[clusters.tls]\ncert = "x"\n',
            "lens.toml line 4, clusters[0].tls.cert: unknown key; expected one of ca_bundle,",
        ),
        (
            '[[clusters]]\nadmin_url = "http://h:1"\ntls.verify = "perhaps"\n',
            "lens.toml line 3, clusters[0].tls.verify must be 1 or 0",
        ),
        (
            '[[clusters]]\nadmin_url = "http://h:1"\ntoken = 42\n',
            "lens.toml line 3, clusters[0].token must be a non-empty string",
        ),
        (
            '[[clusters]]\nadmin_url = "http://h:1"\n[clusters.oauth2]\naudience = "a"\n',
            "lens.toml line 3, clusters[0].oauth2: needs private_key "
            "(PULSAR_LENS_OAUTH2_PRIVATE_KEY)",
        ),
        (
            '[[clusters]]\nname = "bad name"\nadmin_url = "http://h:1"\n',
            "lens.toml line 2, clusters[0].name: 'bad name' is not a cluster name",
        ),
        (
            '[[clusters]]\nname = "a"\nadmin_url = "http://h:1"\n'
            '[[clusters]]\nname = "a"\nadmin_url = "http://h:2"\n',
            "lens.toml line 1, clusters: two clusters are named 'a'; names must be unique",
        ),
        (
            '[[clusters]]\nname = "a"\nadmin_url = "http://h:1"\n'
            '[[clusters]]\nadmin_url = "http://h:2"\n',
            "clusters: with several clusters each needs a name; clusters[1] has none",
        ),
        ("poll_interval = [\n", "lens.toml: not valid TOML: "),
    ],
)
def test_file_errors_name_line_key_and_problem(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in error_of(tmp_path, text)


def test_file_errors_come_together_one_line_each(tmp_path: Path) -> None:
    message = error_of(tmp_path, 'poll_interval = "x"\ndetail_budget = "y"\ncolour = 1\n')
    assert len(message.splitlines()) == 3


def test_file_errors_never_quote_a_secret(tmp_path: Path) -> None:
    text = '[[clusters]]\nadmin_url = "http://h:1"\ntoken = ["s3cr3t-in-a-list"]\n'
    message = error_of(tmp_path, text)
    assert "clusters[0].token" in message and "s3cr3t" not in message


def test_an_environment_error_names_the_variable_even_with_a_file(tmp_path: Path) -> None:
    message = error_of(tmp_path, 'retention = "1d"\n', {"PULSAR_LENS_RETENTION": "a week"})
    assert message.startswith("PULSAR_LENS_RETENTION: 'a week' is not a duration")


def test_retention_default_checked_against_an_environment_interval() -> None:
    with pytest.raises(SettingsError, match="PULSAR_LENS_RETENTION must be at least the poll"):
        Settings.from_env({"PULSAR_LENS_POLL_INTERVAL": "30d"})


@pytest.mark.parametrize(
    ("config", "env", "expected"),
    [
        ("missing.toml", {}, "--config: cannot read the settings file"),
        (None, {"PULSAR_LENS_CONFIG": "missing.toml"}, "PULSAR_LENS_CONFIG: cannot read"),
    ],
)
def test_a_missing_file_is_named_with_how_it_was_given(
    tmp_path: Path, config: str | None, env: dict[str, str], expected: str
) -> None:
    env = {k: str(tmp_path / v) for k, v in env.items()}
    with pytest.raises(SettingsError, match=expected):
        load(env, config=tmp_path / config if config else None)


def test_a_file_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "lens.toml"
    path.write_bytes(b"store = '\xff'\n")
    with pytest.raises(SettingsError, match="cannot read the settings file"):
        load({}, config=path)


def test_cluster_label_without_a_name_hides_credentials() -> None:
    cluster = ClusterSettings(admin_url="http://u:p@h:8080")
    assert cluster.label == "http://h:8080"
    assert ClusterSettings().label == "(no admin URL)"


def test_oauth2_issuer_may_come_from_the_credentials_file(tmp_path: Path) -> None:
    path = write(
        tmp_path, '[[clusters]]\nadmin_url = "http://h:1"\noauth2.private_key = "/creds.json"\n'
    )
    (cluster,) = load({}, config=path).config.clusters
    assert cluster.oauth2.issuer_url is None
    assert connection_of(cluster)["oauth2.private_key"] == "/creds.json"


def test_current_settings_are_read_once_until_the_environment_or_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-lived process (the dashboard's server) reads its settings once; a changed
    variable or a rewritten file is seen at the next call."""
    path = write(tmp_path, 'poll_interval = "10s"\nretention = "1d"\n')
    monkeypatch.setenv("PULSAR_LENS_CONFIG", str(path))
    first = Settings.current()
    assert Settings.current() is first
    assert first.poll_interval == dt.timedelta(seconds=10)

    monkeypatch.setenv("PULSAR_LENS_STORE", str(tmp_path / "elsewhere"))
    moved = Settings.current()
    assert moved is not first and moved.store_dir == tmp_path / "elsewhere"

    write(tmp_path, 'poll_interval = "20s"\nretention = "1d"\n# longer now\n')
    assert Settings.current().poll_interval == dt.timedelta(seconds=20)

    write(tmp_path, 'poll_interval = "fast"\n# a malformed value raises at every call\n')
    for _ in range(2):
        with pytest.raises(SettingsError, match="poll_interval"):
            Settings.current()
