"""The dashboard given bad input: every widget every page builds, fed generated values, never
shows an exception; a value it refuses gets a message naming the field or the plugin.

The widgets are found by running every page in AppTest (the Overview, the Plugins page and
every built-in plugin's page, with mutations from the dashboard on and a user logged in so
the unload drill's choices are there too), not listed by hand, so a page that adds an input
is fed too. Numbers the widget itself refuses (out of its bounds) snap back to the default
before the page sees them, and text boxes keep their `max_chars` (as a browser's do); a browser
sends no NaN or infinity for a whole-number box (Streamlit cannot even turn one into an
int), so those go to float boxes only. Text reaches the page as UTF-8: lone surrogates
cannot cross the wire.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from pulsar_lens.dashboard.forms import (
    FLOAT_LIMIT,
    INT_LIMIT,
    MAX_TEXT_CHARS,
    _bounds,
    text_problem,
)
from pulsar_lens.plugins.registry import discover
from tests.dashboard.scenario import make_poll, write_key_samples, write_scenario
from tests.markdown import shown
from tests.pages import PAGE_SLUGS, plugin_page
from tests.props.strategies import HUGE_NUMBERS, NAME_SAMPLES, props

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
TIMEOUT = 60.0
KINDS = ("number_input", "text_input", "selectbox", "checkbox")
OTHER_INPUTS = (
    "text_area",
    "slider",
    "select_slider",
    "multiselect",
    "radio",
    "date_input",
    "time_input",
    "toggle",
    "color_picker",
)
"""Input widgets no page builds today; one that appears must be added to KINDS and fed."""
USER = {"is_logged_in": True, "email": "ops@example.com"}


@dataclass(frozen=True)
class Widget:
    page: str  # a plugin slug
    kind: str
    key: str
    label: str
    default: Any
    low: float | None = None
    high: float | None = None
    whole: bool = False
    max_chars: int | None = None
    options: tuple[Any, ...] = ()


@dataclass
class Dashboard:
    env: dict[str, str]
    pages: dict[str, AppTest]
    widgets: list[Widget]


def _widget(page: str, kind: str, element: Any) -> Widget:
    common = {"page": page, "kind": kind, "key": element.key, "label": element.label}
    if kind == "number_input":
        whole = element.proto.data_type == element.proto.INT
        return Widget(
            **common,
            default=element.value,
            low=element.min,
            high=element.max,
            whole=whole,
        )
    if kind == "text_input":
        return Widget(**common, default=element.value, max_chars=element.max_chars)
    if kind == "selectbox":
        return Widget(**common, default=element.value, options=tuple(element.options))
    return Widget(**common, default=element.value)


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    root = tmp_path_factory.mktemp("inputs") / "store"
    env = {
        "PULSAR_LENS_STORE": str(root),
        "PULSAR_LENS_POLL_INTERVAL": "10m",
        "PULSAR_LENS_PLUGIN_DIRS": "",
        "PULSAR_LENS_ALLOW_MUTATIONS": "1",
        "PULSAR_LENS_DASHBOARD_MUTATIONS": "1",
        "PULSAR_LENS_SPARK_JOBS": "0",
    }
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        write_key_samples(write_scenario(root))
        pages = {slug: plugin_page(slug, timeout=TIMEOUT, user=USER) for slug in PAGE_SLUGS}
        widgets = [
            _widget(slug, kind, element)
            for slug, at in pages.items()
            for kind in KINDS
            for element in getattr(at, kind)
        ]
        yield Dashboard(env, pages, widgets)


@pytest.fixture
def settled(dashboard: Dashboard, monkeypatch: pytest.MonkeyPatch) -> Dashboard:
    for name, value in dashboard.env.items():
        monkeypatch.setenv(name, value)
    return dashboard


def _shown(at: AppTest) -> str:
    parts = []
    for kind in ("error", "warning", "info", "markdown", "caption", "text", "code"):
        parts.extend(str(getattr(e, "value", "")) for e in getattr(at, kind))
    return "\n".join(parts)


def numbers(widget: Widget) -> st.SearchStrategy[Any]:
    assert widget.low is not None and widget.high is not None
    inside = (
        st.integers(int(widget.low), int(widget.high))
        if widget.whole
        else st.floats(widget.low, widget.high)
    )
    huge = [n for n in HUGE_NUMBERS if not widget.whole or math.isfinite(n)]
    around = st.sampled_from([widget.low - 1, widget.high + 1, widget.low, widget.high])
    wild = st.integers(-(2**70), 2**70) if widget.whole else st.floats()
    return inside | around | st.sampled_from(huge) | wild


TEXTS = [t for t in NAME_SAMPLES if "\ud800" not in t and "\udfff" not in t] + [
    "persistent://public/default/orders | orders-ks",
    "persistent://public/default/nope | nope",
    "nope",
    "persistent://a/b/c/d",
    "tenant/",
    "UTF-16",
    "us-ascii",
    "0x7fffffff_0xffffffff",
    "-1s",
    "99999999999999999999",
]
texts = (
    st.sampled_from(TEXTS)
    | st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
    | st.integers(MAX_TEXT_CHARS - 2, MAX_TEXT_CHARS + 50).map(lambda n: "k" * n)
)


def values(widget: Widget) -> st.SearchStrategy[Any]:
    if widget.kind == "number_input":
        return numbers(widget)
    if widget.kind == "text_input":
        return texts
    if widget.kind == "selectbox":
        return st.sampled_from(widget.options)
    return st.booleans()


def feed(dash: Dashboard, widget: Widget, value: Any) -> AppTest:
    """The page with `value` in the widget (the others at their defaults), run once."""
    at = dash.pages[widget.page]
    element = getattr(at, widget.kind)(key=widget.key)
    element.set_value(value)
    at.run()
    return at


def check(at: AppTest, widget: Widget, value: Any) -> None:
    assert not at.exception, (widget.key, value, [e.value for e in at.exception])
    assert "Traceback" not in _shown(at), (widget.key, value)
    errors = [shown(e.value) for e in at.error]
    # every error names the field, or the plugin whose params refused the value
    assert all(widget.label in e or f"plugin '{widget.page}'" in e for e in errors), errors
    if widget.kind == "number_input":
        used = getattr(at, widget.kind)(key=widget.key).value
        assert widget.low is not None and widget.high is not None
        if isinstance(value, float) and math.isnan(value) and used == used:
            assert used == widget.default, (value, used)  # refused: back to the default
        elif isinstance(value, float) and math.isnan(value):  # taken by the box: ours refuse
            assert any(widget.label in e and "a number from" in e for e in errors), errors
        elif used is not None and not widget.low <= value <= widget.high:
            assert used == widget.default, (value, used)  # refused: back to the default
    if widget.kind == "text_input":  # the box keeps max_chars of it, as a browser's does
        limit = widget.max_chars or MAX_TEXT_CHARS
        assert getattr(at, widget.kind)(key=widget.key).value == value[:limit]
        problem = text_problem(value[:limit], limit)
        if problem:
            assert any(widget.label in e and problem in e for e in errors), (problem, errors)


def reset(dash: Dashboard, widget: Widget) -> None:
    """Back to the default for the next example (sent with its run)."""
    at = dash.pages[widget.page]
    getattr(at, widget.kind)(key=widget.key).set_value(widget.default)


@settings(props(80), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_page_input_fed_generated_values_shows_no_exception(
    settled: Dashboard, data: st.DataObject
) -> None:
    widget = data.draw(st.sampled_from(settled.widgets), label="widget")
    value = data.draw(values(widget), label="value")
    try:
        check(feed(settled, widget, value), widget, value)
    finally:
        reset(settled, widget)


BAD = [
    ("key-shared-map", "analysis_key-shared-map_key", "k" * (MAX_TEXT_CHARS + 1) + "\x07"),
    ("key-shared-map", "analysis_key-shared-map_key", "orders\x00\x1b[2J"),
    ("key-shared-map", "analysis_key-shared-map_jvm_charset", "EBCDIC"),
    ("key-shared-map", "analysis_key-shared-map_add_consumer", "c3\n"),
    ("sticky-ranges", "analysis_sticky-ranges_name_prefix", ""),
    ("key-distribution", "analysis_key-distribution_subscription", "persistent://x/y/z | nope"),
    ("failover-history", "analysis_failover-history_jvm_charset", "\u202e\u200b"),
    ("stuck-hashes", "analysis_stuck-hashes_seconds", math.nan),
    ("stuck-hashes", "analysis_stuck-hashes_seconds", 0.5),
    ("stuck-hashes", "analysis_stuck-hashes_polls", 2**63),
    ("failover-history", "analysis_failover-history_timeline_polls", -(2**31)),
    ("unload-latency", "analysis_unload-latency_slow_ms", math.inf),
]


@pytest.mark.parametrize(("page", "key", "value"), BAD, ids=lambda v: repr(v)[:24])
def test_bad_values_get_a_message_naming_what_was_refused(
    settled: Dashboard, page: str, key: str, value: Any
) -> None:
    (widget,) = [w for w in settled.widgets if w.key == key]
    try:
        at = feed(settled, widget, value)
        check(at, widget, value)
        said = [e.value for e in at.error] + [i.value for i in at.info]
        shown = getattr(at, widget.kind)(key=key).value
        if value == 0.5:  # a fraction of a second is a valid threshold (gt=0)
            assert shown == 0.5 and not at.error, said
        elif widget.kind == "number_input" and not widget.low <= value <= widget.high:
            assert shown == widget.default  # out of bounds: the widget refused it
        else:
            assert said, (key, value)
    finally:
        reset(settled, widget)


def test_every_number_the_dashboard_takes_is_bounded_by_its_plugin(settled: Dashboard) -> None:
    """Fails when a page grows a number box with no bound of its plugin's own (the form
    would fall back to ±2**53), a text box with no length limit, or an input kind the
    generated test does not feed."""
    numbers_ = [w for w in settled.widgets if w.kind == "number_input"]
    assert len(numbers_) >= 20, len(numbers_)
    fallback = {INT_LIMIT, -INT_LIMIT, FLOAT_LIMIT, -FLOAT_LIMIT}
    unbounded = [
        w.key
        for w in numbers_
        if w.low is None or w.high is None or {w.low, w.high} & {float(x) for x in fallback}
    ]
    assert not unbounded, unbounded
    texts_ = [w for w in settled.widgets if w.kind == "text_input"]
    assert texts_ and all(w.max_chars for w in texts_), [w.key for w in texts_]
    for at in settled.pages.values():
        assert not [k for k in OTHER_INPUTS if len(getattr(at, k, ()))], at
    for loaded in discover(entry_points=False, plugin_dirs=()):
        for name, info in loaded.plugin.Params.model_fields.items():
            kind = info.annotation
            if kind in (int, float):
                low, high = _bounds(info, whole=kind is int)
                assert low is not None and high is not None, f"{loaded.name}.{name} unbounded"


def test_an_unknown_cluster_in_the_link_is_named_and_the_newest_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = write_scenario(tmp_path / "store")
    monkeypatch.setenv("PULSAR_LENS_STORE", str(store.root))
    monkeypatch.setenv("PULSAR_LENS_POLL_INTERVAL", "10m")
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", "")
    older = make_poll(dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5), 0)
    store.write(dataclasses.replace(older, cluster="west"))
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params["cluster"] = "no\x1bsuch`cluster"
    at.run()
    assert not at.exception
    assert any("No cluster named" in w.value for w in at.sidebar.warning)
    assert at.sidebar.selectbox(key="sidebar_cluster").value == "standalone"


@pytest.fixture
def garbage_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store whose every file is garbage where a real store keeps its tables: empty,
    random bytes, a parquet-looking header, plain text; plus a folder where a file goes."""
    good, root = tmp_path / "good", tmp_path / "store"
    write_scenario(good)
    for i, path in enumerate(sorted(p for p in good.rglob("*") if p.is_file())):
        target = root / path.relative_to(good)
        target.parent.mkdir(parents=True, exist_ok=True)
        junk = (b"", os.urandom(64), b"PAR1" + os.urandom(100) + b"PAR1", b"not a table\n")
        target.write_bytes(junk[i % 4])
    (root / "topics" / "stray.parquet").mkdir(parents=True)
    shutil.rmtree(good)
    monkeypatch.setenv("PULSAR_LENS_STORE", str(root))
    monkeypatch.setenv("PULSAR_LENS_POLL_INTERVAL", "10m")
    monkeypatch.setenv("PULSAR_LENS_PLUGIN_DIRS", "")
    return root


def test_a_store_of_garbage_files_is_said_on_every_page(garbage_store: Path) -> None:
    said: dict[str, list[str]] = {}
    for slug in PAGE_SLUGS:
        at = plugin_page(slug, timeout=TIMEOUT)
        assert not at.exception and not at.error, slug
        said[slug] = [w.value for w in at.warning] + [i.value for i in at.info]
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    assert not at.exception
    said["overview"] = [w.value for w in at.warning] + [i.value for i in at.info]
    at.switch_page("app_pages/plugins.py").run()
    assert not at.exception
    said["plugins (sidebar)"] = [w.value for w in at.sidebar.warning]
    missing = {page: s for page, s in said.items() if not any("quarantine/" in m for m in s)}
    assert not missing, missing
    assert (garbage_store / "quarantine").is_dir()
