"""Every credential the product knows, against drop-in plugins that try to get them out and an
admin API that quotes them back encoded: plugin workers start without any, and none shows in
any encoding anywhere the real `collect` and `plugins` processes write.

The secret kinds: admin token (variable or file), client token, OAuth2 client secret, URL
password, URL query, the dashboard login's client secret. The places: stderr (log lines and
messages), `plugins --json`, the results' meta.json, the stored snapshot errors, every file of
the store. The encodings: raw, base64 standard and URL-safe with and without padding,
percent-encoded (either hex case, `+` for space).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest

from pulsar_lens.core.store import Store
from tests.cli.test_secret_marker import store_text
from tests.fake_admin import FakeAdmin, Seen
from tests.lens_cli import run_lens
from tests.secret_forms import encodings

# characters that encodings change: `+` and `/` (percent), `>>?` (base64 `+`/`/` vs `-`/`_`)
ADMIN = "MRKadm+Zq/8w~3x>>?"
CLIENT = "MRKcli+Yy7/Hh~2k>>?"
FILE_TOKEN = "MRKfile+Qq4/Pp~9>>?"
OAUTH2 = "MRKoauth+Ww1/Ll~5>>?"
PASSWORD = "MRKpw+Ee3/Rr~6>>?"
QUERY = "MRKq+Tt8/Uu~0>>?"
LOGIN = "MRKoidc+Ii5/Oo~4>>?"
SECRETS = (ADMIN, CLIENT, FILE_TOKEN, OAUTH2, PASSWORD, QUERY, LOGIN)
CREDENTIAL_VARS = re.compile(r"TOKEN|SECRET|OAUTH2|PULSAR_LENS_CONFIG|PULSAR_ADMIN_URL")


EVERY_FORM = [form for s in SECRETS for form in encodings(s).values()]

ANALYZE = """
import json, os
from pulsar_lens.api import AnalysisPlugin, BaseModel, Result

FORMS = {forms!r}


class Leaky(AnalysisPlugin):
    name = "leaky"
    title = "Leaky"
    description = "Writes down its environment and raises with every secret it knows."
    version = "1"
    inputs = ("topics",)
    outputs = ("x",)

    class Params(BaseModel):
        pass

    def analyze(self, data, params):
        with open({dump!r}, "w") as out:
            json.dump(dict(os.environ), out)
        with open("/proc/self/environ", "rb") as proc, open({dump!r} + ".proc", "wb") as out:
            out.write(proc.read())
        raise RuntimeError("leaked: " + " ".join(FORMS))

    def render(self, result):
        return []


PLUGINS = (Leaky,)
"""


def leaks(text: str, secrets: tuple[str, ...] = SECRETS) -> list[str]:
    return [
        f"{secret} ({name})"
        for secret in secrets
        for name, form in encodings(secret).items()
        if form in text
    ]


def echo_every_form(seen: Seen) -> tuple[int, dict[str, str], bytes]:
    """A broker error that quotes every secret in every encoding."""
    return 500, {}, ("failed: " + " ".join(EVERY_FORM)).encode()


def settings(tmp: Path, fake: FakeAdmin, *, token_file: bool) -> dict[str, str]:
    creds = tmp / "oauth2.json"
    creds.write_text(json.dumps({"client_id": "lens", "client_secret": OAUTH2}))
    admin_url = fake.url.replace("//", f"//admin:{quote(PASSWORD, safe='')}@")
    env = {
        "PULSAR_ADMIN_URL": f"{admin_url}/?key={quote(QUERY, safe='')}",
        "PULSAR_SERVICE_URL": f"pulsar://lens:{quote(PASSWORD, safe='')}@127.0.0.1:6650",
        "PULSAR_CLIENT_TOKEN": CLIENT,
        "PULSAR_LENS_OAUTH2_PRIVATE_KEY": str(creds),
        "PULSAR_LENS_OIDC_CLIENT_SECRET": LOGIN,
        "PULSAR_LENS_PLUGIN_DIRS": str(tmp / "plugins"),
    }
    if token_file:
        (tmp / "token").write_text(FILE_TOKEN + "\n")
        env["PULSAR_ADMIN_TOKEN_FILE"] = str(tmp / "token")
    else:
        env["PULSAR_ADMIN_TOKEN"] = ADMIN
    return env


def drop_ins(folder: Path, dump: Path) -> None:
    folder.mkdir()
    (folder / "leaky.py").write_text(ANALYZE.format(forms=EVERY_FORM, dump=str(dump)))
    (folder / "fails_at_import.py").write_text(
        f"raise RuntimeError('cannot start: ' + ' '.join({EVERY_FORM!r}))\n"
    )


@pytest.mark.parametrize("token_file", [False, True], ids=["token-variable", "token-file"])
def test_plugin_workers_hold_no_credential_and_no_secret_is_written_in_any_form(
    tmp_path: Path, token_file: bool
) -> None:
    dump = tmp_path / "worker-env.json"
    drop_ins(tmp_path / "plugins", dump)
    unset = ADMIN if token_file else FILE_TOKEN  # the plugin quotes it; nothing could know it
    known = tuple(s for s in SECRETS if s != unset)
    store = tmp_path / "store"
    with FakeAdmin() as fake:
        fake.rule("/admin/v2/persistent/public/second", echo_every_form)
        env = settings(tmp_path, fake, token_file=token_file)
        collected = run_lens("-v", "collect", "--once", "--store", str(store), env=env)
        listed = run_lens("plugins", "--json", env=env)
    assert collected.returncode == 0, collected.stderr
    # the worker ran, and started with no credential: not in os.environ, not in its start block
    worker_env = json.loads(dump.read_text())
    assert [k for k in worker_env if CREDENTIAL_VARS.search(k)] == []
    assert leaks(json.dumps(worker_env), known) == []
    assert leaks(Path(f"{dump}.proc").read_bytes().decode("utf-8", "replace"), known) == []
    assert b"PULSAR_ADMIN_TOKEN" not in Path(f"{dump}.proc").read_bytes()
    # stderr and the log lines: the plugin's failure and the broker's echo were written, masked
    assert "analysis leaky failed" in collected.stderr and "***" in collected.stderr
    assert leaks(collected.stdout + collected.stderr, known) == []
    # plugins --json lists the import failure, masked
    failed = json.loads(listed.stdout)["failed"]
    assert any("cannot start: " in f["error"] and "***" in f["error"] for f in failed), failed
    assert leaks(listed.stdout + listed.stderr, known) == []
    # the results' meta.json says why leaky failed, masked
    metas = [p.read_text() for p in (store / "results" / "leaky").rglob("meta.json")]
    assert metas and all("leaked: " in m and "***" in m for m in metas)
    assert leaks("\n".join(metas), known) == []
    # the stored snapshot errors quote the broker's error, masked
    errors = "\n".join(Store(store).snapshots()["errors_json"])
    assert "failed: " in errors and "***" in errors
    assert leaks(errors, known) == []
    assert leaks(store_text(store), known) == []


def test_a_drop_in_that_raises_at_import_prints_no_secret_on_stderr(tmp_path: Path) -> None:
    folder = tmp_path / "plugins"
    drop_ins(folder, tmp_path / "unused.json")
    (folder / "leaky.py").unlink()
    env = {"PULSAR_ADMIN_TOKEN": ADMIN, "PULSAR_CLIENT_TOKEN": CLIENT}
    env["PULSAR_LENS_PLUGIN_DIRS"] = str(folder)
    listed = run_lens("plugins", env=env)
    assert listed.returncode == 1
    assert "cannot start: ***" in listed.stdout  # ADMIN's raw form comes first
    assert leaks(listed.stdout + listed.stderr, (ADMIN, CLIENT)) == []
