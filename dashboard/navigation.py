"""The page plan: which pages the app shows, built from the plugin registry (no Streamlit).

Built-in analyses with a dedicated page are shown there; every other plugin, third-party
ones included, gets the generic analysis page at `analysis-<slug>`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from plugins.registry import LoadedPlugin

# plugin slug -> the dedicated page that shows its views among other things
DEDICATED: dict[str, str] = {
    "key-shared-map": "key_shared.py",
    "stuck-hashes": "stuck_hashes.py",
    "failover-assignment": "failover.py",
    "bundle-ownership": "bundles.py",
    "subscription-status": "subscriptions.py",
}


@dataclass(frozen=True, slots=True)
class PageSpec:
    kind: Literal["file", "analysis"]
    target: str  # a file under app_pages/, or a plugin slug
    title: str
    icon: str
    url_path: str
    default: bool = False


CLUSTER = (
    PageSpec("file", "overview.py", "Overview", ":material/monitoring:", "overview", True),
    PageSpec("file", "key_shared.py", "Key_Shared", ":material/key:", "key-shared"),
    PageSpec(
        "file", "stuck_hashes.py", "Stuck hashes", ":material/hourglass_bottom:", "stuck-hashes"
    ),
    PageSpec("file", "failover.py", "Failover", ":material/swap_horiz:", "failover"),
    PageSpec("file", "bundles.py", "Bundles & unloads", ":material/hub:", "bundles"),
    PageSpec("file", "subscriptions.py", "Subscriptions", ":material/list_alt:", "subscriptions"),
)
ABOUT = (PageSpec("file", "plugins.py", "Plugins", ":material/extension:", "plugins"),)


def analysis_url(slug: str) -> str:
    return f"analysis-{slug}"


def page_plan(plugins: Iterable[LoadedPlugin]) -> dict[str, tuple[PageSpec, ...]]:
    """Sections of pages: Cluster, Analyses (plugins without a dedicated page), About."""
    analyses = tuple(
        PageSpec("analysis", p.name, p.title, ":material/analytics:", analysis_url(p.name))
        for p in sorted(plugins, key=lambda p: p.title.lower())
        if p.name not in DEDICATED
    )
    plan = {"Cluster": CLUSTER}
    if analyses:
        plan["Analyses"] = analyses
    plan["About"] = ABOUT
    return plan
