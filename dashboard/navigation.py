"""The page plan: which pages the app shows, built from the plugin registry (no Streamlit).

The Cluster section is the Overview, then every plugin that asks for a page of its own
(`pulsar_lens.api.Page`), built-in or third party alike, at its `url_path` (the slug by default),
in the section its engine names (`engines.Engine.section`): the Spark plugins' pages, analyses
of the whole stored history run as jobs, go to History. Every other plugin gets the generic
analysis page at `analysis-<slug>` under Analyses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pulsar_lens.plugins.engines import engine_of
from pulsar_lens.plugins.registry import LoadedPlugin


@dataclass(frozen=True, slots=True)
class PageSpec:
    kind: Literal["file", "analysis"]
    target: str  # a file under app_pages/, or a plugin slug
    title: str
    icon: str
    url_path: str
    default: bool = False


OVERVIEW = PageSpec("file", "overview.py", "Overview", ":material/monitoring:", "overview", True)
ABOUT = (PageSpec("file", "plugins.py", "Plugins", ":material/extension:", "plugins"),)
ANALYSIS_ICON = ":material/analytics:"


def analysis_url(slug: str) -> str:
    return f"analysis-{slug}"


def page_plan(plugins: Iterable[LoadedPlugin]) -> dict[str, tuple[PageSpec, ...]]:
    """Sections of pages: Cluster (Overview and plugin pages), each engine's other section of
    plugin pages if it has any (History: the Spark ones), Analyses, About.

    Two plugins asking for the same url_path: the first by (order, title) keeps it, the
    other is served at its `analysis-<slug>` path.
    """
    ordered = sorted(plugins, key=lambda p: p.title.lower())
    taken = {OVERVIEW.url_path, *(p.url_path for p in ABOUT)}
    taken |= {analysis_url(p.name) for p in ordered}
    sections: dict[str, list[PageSpec]] = {"Cluster": [OVERVIEW]}
    own = sorted(
        (p for p in ordered if p.plugin.page is not None),
        key=lambda p: (p.plugin.page.order, p.plugin.page.title.lower()),  # type: ignore[union-attr]
    )
    for loaded in own:
        page = loaded.plugin.page
        assert page is not None
        url = page.url_path or loaded.name
        if url in taken:
            url = analysis_url(loaded.name)
        taken.add(url)
        spec = PageSpec("analysis", loaded.name, page.title, page.icon, url)
        sections.setdefault(engine_of(loaded).section, []).append(spec)
    analyses = tuple(
        PageSpec("analysis", p.name, p.title, ANALYSIS_ICON, analysis_url(p.name))
        for p in ordered
        if p.plugin.page is None
    )
    plan = {name: tuple(specs) for name, specs in sections.items()}
    if analyses:
        plan["Analyses"] = analyses
    plan["About"] = ABOUT
    return plan
