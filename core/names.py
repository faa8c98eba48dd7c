"""Names a cluster gives (tenants, namespaces, clusters, broker ids, bundle ranges, topics'
local names) checked as the broker checks them and made into admin request path segments.

Every path segment built from an answer goes through `segment()`: percent-encoded, so `?`,
`#`, `/` or `%` in a name never change which path is asked for, and refused when it is empty,
`.` or `..` (a client removes such segments, so `public/../../clusters` would ask for another
path) or not text at all (a lone surrogate: bytes that were not UTF-8).

Tenant, namespace and cluster names follow Pulsar's `NamedEntity` rule, `^[-=:.\\w]*$` with
Java's ASCII-only `\\w`; a broker id is the `host:port` of its web service.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import quote

NAMED_ENTITY = re.compile(r"[-=:.A-Za-z0-9_]*")  # Java's \w is ASCII-only here
DOT_SEGMENTS = frozenset({".", ".."})
PATH_SAFE = ":="
"""Characters left as they are in a segment: both are legal in a URL path segment (RFC 3986
pchar), carry no meaning there, and Pulsar's own admin client sends them unencoded."""
_HOST_NAME = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?")
_BUNDLE = re.compile(r"0x[0-9a-fA-F]{8}_0x[0-9a-fA-F]{8}")
MAX_PORT = 65_535
MAX_HOST = 253  # the longest DNS name


class NameRefused(ValueError):
    """A name from the cluster that no request path may carry."""


def shown_name(text: str) -> str:
    """`text` quoted for a message (repr escapes control characters and lone surrogates),
    at most 80 characters."""
    shown = repr(text)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def segment(text: str) -> str:
    """`text` as one percent-encoded path segment; NameRefused for a dot segment, an empty
    name or one that is not text (a lone surrogate)."""
    if not text or text in DOT_SEGMENTS:
        raise NameRefused(f"{shown_name(text)} cannot be a path segment")
    if any("\ud800" <= c <= "\udfff" for c in text):
        raise NameRefused(f"{shown_name(text)} is not valid text")
    return quote(text, safe=PATH_SAFE)


def named_entity(kind: str, name: str) -> str:
    """`name` when Pulsar would accept it as a `kind` (tenant, namespace, cluster) name and
    a path can carry it; NameRefused saying why otherwise."""
    if not name or not NAMED_ENTITY.fullmatch(name):
        raise NameRefused(
            f"{kind} {shown_name(name)} is not a valid Pulsar name (letters, digits and "
            "- = : . _ only)"
        )
    if name in DOT_SEGMENTS:
        raise NameRefused(f"{kind} {shown_name(name)} cannot be a path segment")
    return name


def entity_segment(kind: str, name: str) -> str:
    """A tenant, namespace or cluster name checked (`named_entity`) and encoded (`segment`)."""
    return segment(named_entity(kind, name))


def namespace_path(namespace: str) -> str:
    """`tenant/ns` (or a v1 `tenant/cluster/ns`) as encoded path segments; NameRefused
    when it has another shape or a part Pulsar would refuse."""
    parts = namespace.split("/")
    if len(parts) not in (2, 3):
        raise NameRefused(f"namespace {shown_name(namespace)} is not tenant/namespace")
    kinds = ("tenant", "namespace") if len(parts) == 2 else ("tenant", "cluster", "namespace")
    try:
        return "/".join(entity_segment(k, p) for k, p in zip(kinds, parts, strict=True))
    except NameRefused as exc:
        raise NameRefused(f"namespace {shown_name(namespace)}: {exc}") from None


def checked_broker_id(broker_id: str) -> str:
    """`broker_id` when it is a `host:port` (`broker_id_problem`); NameRefused otherwise."""
    problem = broker_id_problem(broker_id)
    if problem:
        raise NameRefused(f"broker id {shown_name(broker_id)} {problem}")
    return broker_id


def broker_id_segment(broker_id: str) -> str:
    """A broker id checked (`checked_broker_id`) and encoded as a path segment."""
    return segment(checked_broker_id(broker_id))


def broker_id_problem(broker_id: str) -> str | None:
    """Why `broker_id` is not a `host:port` (a DNS name, IPv4 or bracketed IPv6 address and
    a port from 1 to 65535); None when it is one."""
    host, sep, port = broker_id.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or not 0 < int(port) <= MAX_PORT:
        return "is not host:port (a port from 1 to 65535)"
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return "has no valid IPv6 address in its brackets"
        return None
    labels = host.split(".")
    if len(host) > MAX_HOST or not all(_HOST_NAME.fullmatch(label) for label in labels):
        return "has no valid host name (letters, digits, - and _ in dot-separated labels)"
    return None


def bundle_segment(bundle: str) -> str:
    """A bundle range `0x00000000_0x40000000` checked for that exact shape, as a segment."""
    if not _BUNDLE.fullmatch(bundle):
        raise NameRefused(f"bundle {shown_name(bundle)} is not 0x%08x_0x%08x")
    return segment(bundle)
