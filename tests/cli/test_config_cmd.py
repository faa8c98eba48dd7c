"""`pulsar-lens config check` against the live broker and an unreachable URL: origins,
masking, the connection test and its exit code, text and JSON."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from pulsar_lens.lab.localpulsar import LocalPulsar, free_port
from tests.lens_cli import run_lens

TOKEN = "config-check-token-4f1e"


def check(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    done = run_lens("config", "check", "--timeout", "5", *args, env=env, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


def test_check_from_the_environment_reaches_the_live_broker(pulsar: LocalPulsar) -> None:
    env = {"PULSAR_ADMIN_URL": pulsar.admin_url, "PULSAR_ADMIN_TOKEN": TOKEN}
    code, out, err = check(env=env)
    assert code == 0, out + err
    assert "settings file: none" in out
    assert "****" in out and TOKEN not in out + err
    broker = pulsar.admin_url.removeprefix("http://")
    assert "ok in " in out and f"standalone: 1 broker(s) {broker}" in out
    line = next(x for x in out.splitlines() if x.split()[:1] == ["admin_url"])
    assert line.split()[-2:] == ["env", "PULSAR_ADMIN_URL"]


def test_check_json_reports_origins_masks_and_each_clusters_answer(
    pulsar: LocalPulsar, tmp_path: Path
) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    config = tmp_path / "lens.toml"
    config.write_text(
        textwrap.dedent(
            f"""\
            poll_interval = "15s"

            [[clusters]]
            name = "live"
            admin_url = "{pulsar.admin_url}"
            token = "{TOKEN}"

            [[clusters]]
            name = "gone"
            admin_url = "{closed}"
            """
        )
    )
    env = {"PULSAR_LENS_RETENTION": "2d"}
    code, out, err = check("--json", "--config", str(config), env=env)
    assert code == 1, err
    assert TOKEN not in out + err
    report = json.loads(out)
    assert report["ok"] is False and report["file"] == str(config)
    assert report["settings"]["poll_interval"] == {
        "value": "15s",
        "source": "file",
        "where": "lens.toml line 1",
        "env": "PULSAR_LENS_POLL_INTERVAL",
    }
    assert report["settings"]["retention"]["source"] == "env"
    assert report["settings"]["store"]["source"] == "default"
    live, gone = report["clusters"]
    assert live["name"] == "live" and live["settings"]["token"]["value"] == "****"
    assert live["check"]["ok"] is True
    assert live["check"]["clusters"] == ["standalone"]
    assert live["check"]["brokers"] == {"standalone": [pulsar.admin_url.removeprefix("http://")]}
    assert live["check"]["calls"] == ["GET /admin/v2/clusters", "GET /admin/v2/brokers/standalone"]
    assert gone["check"]["ok"] is False and gone["check"]["brokers"] == {}
    assert "GET /admin/v2/clusters" in gone["check"]["error"]


def test_check_of_an_unreachable_url_fails_with_exit_1() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, out, _ = check(env={"PULSAR_ADMIN_URL": url})
    assert code == 1
    assert "connection           FAILED: GET /admin/v2/clusters" in out
    assert out.rstrip().endswith("FAILED: a cluster did not answer (see connection)")


def test_check_without_an_admin_url_says_what_to_set() -> None:
    code, out, _ = check()
    assert code == 1 and "no admin URL; set PULSAR_ADMIN_URL" in out


def test_check_of_a_malformed_file_exits_2_naming_the_line(tmp_path: Path) -> None:
    config = tmp_path / "lens.toml"
    config.write_text('[[clusters]]\nname = "a"\nadmin_url = "ftp://x:1"\n')
    code, out, err = check("--config", str(config))
    assert code == 2 and out == ""
    assert "lens.toml line 3, clusters[0].admin_url: 'ftp://x:1' must start with http://" in err


def test_check_lists_connection_variables_no_cluster_takes(tmp_path: Path) -> None:
    config = tmp_path / "lens.toml"
    config.write_text(
        '[[clusters]]\nname = "a"\nadmin_url = "http://a:1"\n'
        '[[clusters]]\nname = "b"\nadmin_url = "http://b:1"\n'
    )
    code, out, _ = check("--no-connect", "--config", str(config), env={"PULSAR_ADMIN_TOKEN": TOKEN})
    assert code == 0 and "ignored: PULSAR_ADMIN_TOKEN" in out and TOKEN not in out
