"""Credential settings that cannot work, through the real `collect`: a secret file that is a
device, a FIFO, a folder or far too large; a token no HTTP header can carry; an admin URL
with a query; a refused URL password. Each ends at once with a message naming the setting
and why, never a traceback, a hang or the secret itself."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs, quote

import pytest

from tests.collectors.recorded import index
from tests.fake_admin import FakeAdmin, Seen
from tests.lens_cli import run_lens

DEADLINE = 60.0  # a refusal is instant; the wide margin is for a loaded machine


def dev_zero(tmp: Path) -> Path:
    return Path("/dev/zero")


def fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "fifo")  # nobody ever writes: reading it would wait forever
    return tmp / "fifo"


def folder(tmp: Path) -> Path:
    (tmp / "folder").mkdir()
    return tmp / "folder"


def huge(tmp: Path) -> Path:
    path = tmp / "huge"
    with path.open("wb") as out:
        out.truncate(100 * 1024 * 1024)  # sparse: 100 MB that costs no disk
    return path


FILES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "dev-zero": (dev_zero, "not a regular file (it is a character device)"),
    "fifo": (fifo, "not a regular file (it is a named pipe)"),
    "folder": (folder, "not a regular file (it is a folder)"),
    "100MB": (huge, "larger than 64 KiB"),
}
SETTINGS = ("PULSAR_ADMIN_TOKEN_FILE", "PULSAR_LENS_OAUTH2_PRIVATE_KEY")


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("kind", FILES)
def test_collect_refuses_a_secret_file_that_is_not_a_small_regular_file(
    tmp_path: Path, kind: str, setting: str
) -> None:
    make, why = FILES[kind]
    env = {"PULSAR_ADMIN_URL": "http://127.0.0.1:9", setting: str(make(tmp_path))}
    if setting.startswith("PULSAR_LENS_OAUTH2"):
        env["PULSAR_LENS_OAUTH2_ISSUER_URL"] = "http://127.0.0.1:9"
    done = run_lens(
        "collect", "--once", "--store", str(tmp_path / "store"), env=env, timeout=DEADLINE
    )
    assert done.returncode == 2, done.stderr
    assert why in done.stderr and setting in done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr


# characters no HTTP header carries as they are: beyond ASCII (an emoji, a letter with an
# accent, a no-break space, a zero-width space, CJK) and control characters
UNSENDABLE = {
    "emoji": "tok\U0001f511en",
    "accent": "caf\u00e9-token",
    "no-break-space": "nbsp\u00a0token",
    "zero-width": "zero\u200bwidth",
    "cjk": "\u4ee4\u724c-token",
    "tab": "tab\ttoken",
    "escape": "esc\x1b[31mtoken",
}
CASES = [(kind, source) for kind in UNSENDABLE for source in ("variable", "file")]
CASES.append(("nul", "file"))  # an environment variable cannot hold a NUL; a file can
UNSENDABLE["nul"] = "nul\x00token"


@pytest.mark.parametrize(("kind", "source"), CASES)
def test_collect_refuses_a_token_no_header_can_carry_naming_the_setting(
    tmp_path: Path, kind: str, source: str
) -> None:
    token = UNSENDABLE[kind]
    if source == "file":
        (tmp_path / "token").write_text(token, encoding="utf-8")
        env = {"PULSAR_ADMIN_TOKEN_FILE": str(tmp_path / "token")}
    else:
        env = {"PULSAR_ADMIN_TOKEN": token}
    setting = next(iter(env))
    with FakeAdmin() as fake:
        env["PULSAR_ADMIN_URL"] = fake.url
        store = str(tmp_path / "store")
        done = run_lens("collect", "--once", "--store", store, env=env, timeout=DEADLINE)
        assert fake.seen() == []  # refused before anything was sent
    assert done.returncode == 2, done.stderr
    assert "no HTTP header can carry" in done.stderr and setting in done.stderr
    assert "Traceback" not in done.stderr and "latin-1" not in done.stderr
    assert token not in done.stderr


def every_path_answers(fake: FakeAdmin, status: int, reason: str) -> None:
    def refuse(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        return status, {"Content-Type": "application/json"}, json.dumps({"reason": reason}).encode()

    for entry in index(fake.scenario):
        fake.rule(entry["path"], refuse)


REFUSALS = {  # status, Pulsar's reason
    "unauthenticated": (401, "Authentication required"),
    "unauthorized": (401, "Unauthorized to validateSuperUserAccess"),
    "forbidden": (403, "Forbidden"),
}


@pytest.mark.parametrize("refusal", REFUSALS)
@pytest.mark.parametrize("credential", ["password", "token"])
def test_a_refusal_names_the_credential_actually_sent(
    tmp_path: Path, refusal: str, credential: str
) -> None:
    with FakeAdmin() as fake:
        every_path_answers(fake, *REFUSALS[refusal])
        if credential == "password":
            env = {"PULSAR_ADMIN_URL": fake.url.replace("//", "//ops:MRKpw-refused@")}
            named, not_named = "password of user 'ops' in PULSAR_ADMIN_URL", "PULSAR_ADMIN_TOKEN"
        else:
            env = {"PULSAR_ADMIN_URL": fake.url, "PULSAR_ADMIN_TOKEN": "MRKtok-refused"}
            named, not_named = "PULSAR_ADMIN_TOKEN", "password"
        store = str(tmp_path / "store")
        done = run_lens("collect", "--once", "--store", store, env=env, timeout=DEADLINE)
    assert done.returncode == 1, done.stderr
    assert "refused" in done.stderr and named in done.stderr
    assert not_named not in done.stderr
    assert "MRKpw-refused" not in done.stderr and "MRKtok-refused" not in done.stderr


QUERY_SECRET = "MRKq+gw/key>>?"


def test_an_admin_url_query_follows_every_path_and_is_never_shown(tmp_path: Path) -> None:
    query = f"apikey={quote(QUERY_SECRET, safe='')}"
    store = str(tmp_path / "store")
    with FakeAdmin() as fake:
        env = {"PULSAR_ADMIN_URL": f"{fake.url}/?{query}"}
        done = run_lens("-v", "collect", "--once", "--store", store, env=env, timeout=120)
        seen = fake.seen()
    assert done.returncode == 0, done.stderr
    assert {s.path for s in seen} >= {"/admin/v2/clusters", "/admin/v2/tenants"}
    assert all(parse_qs(s.query)["apikey"] == [QUERY_SECRET] for s in seen), seen[:3]
    assert "apikey=***" in done.stderr or "apikey" not in done.stderr
    assert quote(QUERY_SECRET, safe="") not in done.stderr and QUERY_SECRET not in done.stderr


def test_the_unreachable_line_masks_the_admin_url_query(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:9/?apikey={quote(QUERY_SECRET, safe='')}"
    store = str(tmp_path / "store")
    done = run_lens(
        "collect", "--once", "--store", store, env={"PULSAR_ADMIN_URL": url}, timeout=DEADLINE
    )
    assert done.returncode == 1
    assert "could not reach the admin API at http://127.0.0.1:9/?apikey=***" in done.stderr
    assert "/?apikey" not in done.stderr.replace("/?apikey=***", "")  # never spliced before a path
    assert quote(QUERY_SECRET, safe="") not in done.stderr and QUERY_SECRET not in done.stderr
