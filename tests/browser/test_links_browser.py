"""Links that open the same view: the stuck-hash alert's `dashboard_url`, as promtool renders
it for the served dashboard, opens the Key_Shared page on that subscription; a pasted URL
with a subscription and a control restores both; changing a control rewrites the address;
the back button returns to the page as it was left."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import yaml
from playwright.sync_api import Page, expect

from tests.browser.conftest import serve
from tests.browser.test_dashboard_browser import TIMEOUT_MS, assert_healthy, open_page
from tests.dashboard.scenario import ORDERS, PAYMENTS, write_scenario
from tests.deploy.prometheus_server import PROMTOOL

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
ALERT = "PulsarLensStuckHashes"
TESTED = ("persistent://shop/orders/orders", "billing", "http://lens.example:8501")


def rendered_alert_link(tmp: Path, base_url: str, topic: str, subscription: str) -> str:
    """The stuck-hash alert's `dashboard_url` for `topic`/`subscription` with the dashboard at
    `base_url`: alerts.test.yml's case of that alert with those names, run by promtool (which
    passes only when the rules render exactly the link it expects)."""
    cases = yaml.safe_load((DEPLOY / "alerts.test.yml").read_text())["tests"]
    (case,) = [c for c in cases if any(t["alertname"] == ALERT for t in c["alert_rule_test"])]
    tested_label = quote_plus(f"{TESTED[0]} | {TESTED[1]}")
    text = yaml.safe_dump(case).replace(tested_label, quote_plus(f"{topic} | {subscription}"))
    for old, new in zip(TESTED, (topic, subscription, base_url), strict=True):
        text = text.replace(old, new)
    case = yaml.safe_load(text)
    unit = {"rule_files": [str(DEPLOY / "alerts.yml")], "evaluation_interval": "1m"}
    (tmp / "link.test.yml").write_text(yaml.safe_dump({**unit, "tests": [case]}))
    done = subprocess.run(
        [PROMTOOL, "test", "rules", "link.test.yml"],
        cwd=tmp, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    links = [a["exp_annotations"]["dashboard_url"] for a in firing(case)]
    assert len(links) == 1 and links[0].startswith(base_url + "/"), links
    return str(links[0])


def firing(case: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for t in case["alert_rule_test"] for a in t.get("exp_alerts") or []]


def subscription_box(page: Page) -> Any:
    return page.get_by_role("combobox", name="Subscription")


def test_browser_alert_link_and_pasted_url_open_the_same_view(tmp_path: Path, page: Page) -> None:
    write_scenario(tmp_path / "store", polls=6)
    served = serve(tmp_path / "store", PULSAR_LENS_POLL_INTERVAL="1h")
    try:
        payments = f"{PAYMENTS} | payments-ks"
        link = rendered_alert_link(tmp_path, served.url, PAYMENTS, "payments-ks")
        open_page(page, link, "Key_Shared")
        expect(subscription_box(page)).to_have_value(payments, timeout=TIMEOUT_MS)
        expect(page.get_by_text("Draining hashes").first).to_be_visible()
        assert_healthy(page)

        orders = f"{ORDERS} | orders-ks"
        pasted = f"{served.url}/key-shared?subscription={quote_plus(orders)}&key=9"
        open_page(page, pasted, "Key_Shared")
        expect(subscription_box(page)).to_have_value(orders, timeout=TIMEOUT_MS)
        expect(page.get_by_role("textbox", name="Message key")).to_have_value("9")
        sticky = page.get_by_test_id("stMetric").filter(has_text="Sticky hash")
        expect(sticky).to_contain_text("2862", timeout=TIMEOUT_MS)

        box = page.get_by_role("textbox", name="Message key")
        box.fill("7")
        box.press("Enter")
        expect(page).to_have_url(re.compile(r"[?&]key=7(&|$)"), timeout=TIMEOUT_MS)
        assert "subscription=" in page.url

        page.get_by_test_id("stSidebar").get_by_text("Failover", exact=True).click()
        expect(page.locator("h1").first).to_have_text("Failover", timeout=TIMEOUT_MS)
        page.go_back()  # Streamlit drops the query: the page comes back as it was left
        expect(page.locator("h1").first).to_have_text("Key_Shared", timeout=TIMEOUT_MS)
        expect(subscription_box(page)).to_have_value(orders, timeout=TIMEOUT_MS)
        expect(page.get_by_role("textbox", name="Message key")).to_have_value("7")
        expect(page).to_have_url(re.compile(r"[?&]key=7(&|$)"), timeout=TIMEOUT_MS)
        assert_healthy(page)
    finally:
        served.stop()
