"""benchmarks/dashboard.py runs at a tiny size and prints every page's figures and every light
plugin's compute_results figure, with no warning row."""

from __future__ import annotations

import pytest

from benchmarks import dashboard
from pulsar_lens.plugins.engines import engine_of
from pulsar_lens.plugins.registry import PLUGIN_DIRS_ENV, discover


def test_dashboard_benchmark_runs_tiny(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PULSAR_LENS_STORE", "PULSAR_LENS_POLL_INTERVAL", PLUGIN_DIRS_ENV):
        monkeypatch.setenv(name, "")  # main() sets them; the fixture puts them back after
    plugins = list(discover())
    assert dashboard.main(["--sizes", "20", "--polls", "2"]) == 0
    out = capsys.readouterr().out
    assert "WARNING" not in out
    pages, computed = (_rows(part) for part in out.split("compute_results per light plugin"))
    for page in dashboard.page_list(plugins):
        assert page in pages, f"no figures for the {page} page"
        topics, *seconds = pages[page][:4]
        assert topics == "20" and all(float(s) >= 0 for s in seconds), pages[page]
    light = [p.name for p in plugins if engine_of(p).per_poll]
    assert light, "no light plugin to time"
    for slug in light:
        seconds = computed[slug][0]
        assert seconds.endswith("s") and float(seconds[:-1]) >= 0, computed[slug]


def _rows(text: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.strip()}
