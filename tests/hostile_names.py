"""The dashboard's scenario store with the names a cluster chooses made hostile: Markdown
images and links, HTML, LaTeX, colour directives, emoji shortcodes, backticks, line breaks,
web addresses, put into one kind of name (tenant, namespace, topic, subscription, consumer
or broker) wherever it appears, as if the admin API had answered them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pulsar_lens.core.store import Store
from tests.dashboard import scenario

FIELDS = ("tenant", "namespace", "topic", "subscription", "consumer", "broker")
SUBSCRIPTIONS = ("orders-ks", "payments-ks", "audit-archiver", "events-fo")
CONSUMERS = ("c1", "c2", "ev-1", "ev-2")

CONSTRUCTS = {
    "markdown image": "![b](x.png)",
    "markdown link": "[c](https:evil.example)",
    "html": "<img src=x.png>",
    "latex": "$x$",
    "colour": ":red[x]",
    "emoji and logo": ":fire: :streamlit:",
    "backticks": "`x`",
    "line break and heading": "\n# h",
    "autolink": "www.evil.example",
}
"""One of each kind of Markdown a name could carry, none with a slash: a tenant, namespace or
topic with one would not parse as a Pulsar name at all."""

FRAGMENTS = ("![b]", "[c](", "<img", "$x$", ":red[", ":fire:", ":streamlit:", "evil.example")
"""Parts of the constructs that are Markdown syntax only where a name went in unescaped."""

HOSTILE = " ".join(CONSTRUCTS.values())
PARTIAL_ERROR = "GET /admin/v2/broker-stats/load-report"


def renamer(field: str, name: str) -> Callable[[str], str]:
    """Turns each name of kind `field` in the scenario into one that holds `name`."""
    known = {"subscription": SUBSCRIPTIONS, "consumer": CONSUMERS, "broker": scenario.BROKERS}

    def rename(value: str) -> str:
        if field == "broker" and value == PARTIAL_ERROR:  # a call to the broker's own URL
            return f"GET http://{name} {scenario.BROKERS[0]}/admin/v2/broker-stats/load-report"
        if field == "tenant":
            return value.replace("public", name)
        if field == "namespace":
            return value.replace("/default", f"/{name}")
        if field == "topic" and value.startswith(f"persistent://{scenario.NS}/"):
            return f"persistent://{scenario.NS}/{name} {value.rsplit('/', 1)[1]}"
        return f"{name} {value}" if value in known.get(field, ()) else value

    return rename


def write_hostile_scenario(root: Path, field: str, name: str = HOSTILE) -> Store:
    """The scenario's polls and key samples with every name of kind `field` holding `name`;
    the newest poll is partial, a call to a broker having failed."""
    rename = renamer(field, name)
    store = scenario.write_scenario(root, rename=rename, partial=True)
    scenario.write_key_samples(store, rename(scenario.PAYMENTS))
    return store
