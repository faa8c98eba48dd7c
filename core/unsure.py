"""What a partial snapshot leaves unknown, read from the endpoints of its failed calls.

A bundle listed without an owner is unowned only when the calls that tell its owner
succeeded: when a broker's `ownedNamespaces` call failed (the broker is down, or slow), its
bundles are listed without an owner although it may still own them. The collector's event
diff and the bundle-ownership analysis both ask `unsure_of(endpoints)` what to leave alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from pulsar_lens.core.model import parse_errors

_TOPIC_STATS = re.compile(r"/admin/v2/(persistent|non-persistent)/([^/]+)/([^/]+)/([^/?]+)/stats")
_BUNDLES = re.compile(r"/admin/v2/namespaces/([^/]+)/([^/]+)/bundles")
_DISCOVERY = re.compile(r"/admin/v2/(clusters|brokers/(?!leaderBroker$|version$)[^/]+)")


@dataclass
class Unsure:
    """What a snapshot's errors leave unknown."""

    everything: bool = False  # the cluster or its brokers could not be listed
    bulk_brokers: set[str] = field(default_factory=set)  # host:port whose topic stats failed
    owner_brokers: set[str] = field(default_factory=set)  # whose owned bundles are unknown
    topics: set[str] = field(default_factory=set)  # whose own stats failed
    namespaces: set[str] = field(default_factory=set)  # whose bundle list failed

    @property
    def bundles(self) -> bool:
        """Whether some bundle's owner, or some namespace's bundles, are unknown."""
        return bool(self.owner_brokers or self.namespaces)

    def owner(self, listed: str | None, last: str | None) -> str | None:
        """A bundle's owner as it stands: the `listed` one, or its `last` known owner when
        it is listed unowned only because that owner's ownedNamespaces call failed."""
        return last if listed is None and last in self.owner_brokers else listed

    def merge(self, other: Unsure) -> Unsure:
        return Unsure(
            self.everything or other.everything,
            self.bulk_brokers | other.bulk_brokers,
            self.owner_brokers | other.owner_brokers,
            self.topics | other.topics,
            self.namespaces | other.namespaces,
        )


def endpoint_target(endpoint: str) -> tuple[str, str]:
    """(host, path) of a failed call's endpoint ("GET http://broker:8080/admin/v2/..." or
    "GET /admin/v2/..."); the host is '' for a call to the admin URL.

    A broker's name is whatever the cluster listed: one that is no valid host (a `[` that
    opens no IPv6 address, say) is still cut out of the URL, not refused.
    """
    url = endpoint.partition(" ")[2]
    try:
        parts = urlsplit(url)
    except ValueError:
        host, _, rest = url.partition("://")[2].partition("/")
        return host, "/" + re.split(r"[?#]", rest, maxsplit=1)[0]
    return parts.netloc, parts.path or url


def unsure_of(endpoints: Iterable[str]) -> Unsure:
    """`endpoints` are the failed calls of one snapshot, as EndpointError.endpoint has them
    ("GET /admin/v2/..." or "GET http://broker:8080/admin/v2/...")."""
    found = Unsure()
    for endpoint in endpoints:
        host, path = endpoint_target(endpoint)
        if "/broker-stats/topics" in path:
            if host:
                found.bulk_brokers.add(host)
            else:
                found.everything = True
        elif path.endswith("/ownedNamespaces"):
            found.owner_brokers.add(host or path.split("/")[-2])
        elif match := _TOPIC_STATS.search(path):
            domain, tenant, ns, local = match.groups()
            found.topics.add(f"{domain}://{tenant}/{ns}/{unquote(local)}")
        elif match := _BUNDLES.search(path):
            found.namespaces.add(f"{match.group(1)}/{match.group(2)}")
        elif _DISCOVERY.fullmatch(path):
            found.everything = True
    return found


def unsure_of_stored(errors_json: object) -> Unsure:
    """`unsure_of` for an index row's `errors_json` cell; a cell that cannot be read leaves
    everything unknown."""
    try:
        errors = parse_errors(errors_json)
    except (ValueError, TypeError, AttributeError):
        return Unsure(everything=True)
    return unsure_of(error.endpoint for error in errors)
