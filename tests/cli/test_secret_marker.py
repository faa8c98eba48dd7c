"""A marker token and a marker URL password, against an admin API that echoes request headers
in its answers, its errors and its redirects: neither ever appears anywhere we write.

Greps stderr and stdout of `collect` and `analyze`, every file of the store (raw bytes and
decoded tables), the results, the /metrics text, and every dashboard page.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from streamlit.testing.v1 import AppTest

from pulsar_lens.core.store import Store
from tests.fake_admin import FakeAdmin, Seen, echo_headers
from tests.lens_cli import run_lens
from tests.pages import PAGE_SLUGS, plugin_page

TOKEN = "MRKtok-Zq8w3x-Yy7"
PASSWORD = "MRKpw-Hh2k9v-Qq4"
APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
PAGES = ("plugins.py",)


def forms(secret: str) -> list[str]:
    """Every shape the secret could leak in: itself, halves, base64 forms."""
    half = len(secret) // 2
    shapes = [secret, secret[:half], secret[half:], base64.b64encode(secret.encode()).decode()]
    shapes.append(base64.b64encode(f"admin:{secret}".encode()).decode())
    return shapes


def leaks(text: str) -> list[str]:
    return [f for s in (TOKEN, PASSWORD) for f in forms(s) if f in text]


def hostile(fake: FakeAdmin, elsewhere: FakeAdmin) -> None:
    """Echo headers in an unexpected 200 shape, in an error with a forged log line, and
    redirect to a host nobody trusted."""

    def unexpected(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        body = json.dumps(list(echo_headers(seen))).encode()
        return 200, {"Content-Type": "application/json"}, body

    def error(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        body = "failed\n2026-11-25 INFO forged line\n" + "\n".join(echo_headers(seen))
        return 500, {}, body.encode()

    def redirect(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        return 307, {"Location": elsewhere.url + "/admin/v2/brokers/version"}, b""

    fake.rule("/admin/v2/persistent/public/default/orders/stats", unexpected)
    fake.rule("/admin/v2/persistent/public/second", error)
    fake.rule("/admin/v2/brokers/version", redirect)
    elsewhere.rule(
        "/admin/v2/brokers/version",
        lambda seen: (200, {}, "\n".join(echo_headers(seen)).encode()),
    )


def metrics_text(store: Store) -> str:
    """What /metrics serves over this store."""
    from pulsar_lens.exporter.collector import LensCollector
    from pulsar_lens.exporter.families import exposition

    return exposition(list(LensCollector(store).collect()))


def store_text(root: Path) -> str:
    parts = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            parts.append(path.read_bytes().decode("latin-1"))
            if path.suffix == ".parquet":
                parts.append(pq.read_table(path).to_pandas().to_csv())
    return "\n".join(parts)


def page_texts(at: AppTest) -> Iterator[str]:
    def walk(node: Any) -> Iterator[str]:
        proto = getattr(node, "proto", None)
        if proto is not None:
            yield str(proto)
        value = getattr(node, "value", None)
        if hasattr(value, "to_csv"):
            yield value.to_csv()
        for child in getattr(node, "children", {}).values():
            yield from walk(child)

    yield from walk(at._tree)


@pytest.fixture
def collected(tmp_path: Path) -> Iterator[tuple[Path, list[str], FakeAdmin]]:
    store = tmp_path / "store"
    outputs = []
    with FakeAdmin() as fake, FakeAdmin() as elsewhere:
        hostile(fake, elsewhere)
        by_token = {"PULSAR_ADMIN_URL": fake.url, "PULSAR_ADMIN_TOKEN": TOKEN}
        by_password = {"PULSAR_ADMIN_URL": fake.url.replace("//", f"//admin:{PASSWORD}@")}
        for env in (by_token, by_password):
            done = run_lens("-v", "collect", "--once", "--store", str(store), env=env)
            assert done.returncode == 0, done.stderr
            outputs += [done.stdout, done.stderr]
        assert not [s for s in elsewhere.seen() if "Authorization" in s.headers]
        yield store, outputs, fake


def test_no_secret_reaches_stderr_the_store_or_metrics(
    collected: tuple[Path, list[str], FakeAdmin],
) -> None:
    store, outputs, _ = collected
    assert any("Bearer ***" in o or "Basic ***" in o for o in outputs)  # the echo was seen
    assert not any("\nforged line" in o for o in outputs)  # one log line stays one line
    for output in outputs:
        assert leaks(output) == []
    for slug in ("subscription-status", "key-shared-map"):
        done = run_lens("analyze", slug, "--store", str(store), "--json")
        assert done.returncode == 0, done.stderr
        assert leaks(done.stdout + done.stderr) == []
    errors = "\n".join(Store(store).snapshots()["errors_json"])
    assert "Bearer ***" in errors and leaks(errors) == []
    assert leaks(store_text(store)) == []
    assert leaks(metrics_text(Store(store))) == []


def test_no_secret_reaches_any_dashboard_page(
    collected: tuple[Path, list[str], FakeAdmin], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _, _ = collected
    monkeypatch.setenv("PULSAR_LENS_STORE", str(store))
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception
    texts = list(page_texts(at))
    assert any("Basic ***" in t for t in texts)  # the Overview lists the echoing error
    for page in PAGES:
        at.switch_page(f"app_pages/{page}").run()
        assert not at.exception, page
        texts += list(page_texts(at))
    for slug in PAGE_SLUGS:
        shown = plugin_page(slug, timeout=60)
        assert not shown.exception, slug
        texts += list(page_texts(shown))
    assert leaks("\n".join(texts)) == []
