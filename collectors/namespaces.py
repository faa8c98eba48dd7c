"""Tenants, namespaces, bundle boundaries and topic listings (one call per namespace each)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pulsar_lens.collectors.admin import AdminClient
from pulsar_lens.collectors.fields import as_dict, as_text
from pulsar_lens.core import bundles as bundles_model
from pulsar_lens.core.errors import AdminApiError, ModelError
from pulsar_lens.core.hashing import topic_bundle_hash
from pulsar_lens.core.limits import MAX_PARTITIONS
from pulsar_lens.core.model import BundleRecord
from pulsar_lens.core.names import entity_segment, namespace_path
from pulsar_lens.core.topicname import parse_topic_name


def _expect_list(payload: Any, method: str, path: str) -> list[str]:
    return [as_text(item) for item in _listed(payload, method, path) if isinstance(item, str)]


def _listed(payload: Any, method: str, path: str) -> list[Any]:
    if not isinstance(payload, list):
        raise AdminApiError(method, path, None, repr(payload), "expected a JSON list")
    return payload


def collect_tenants(client: AdminClient, *, timeout: float) -> list[str]:
    """GET /admin/v2/tenants"""
    path = "/admin/v2/tenants"
    return _expect_list(client.get_json(path, timeout=timeout), "GET", path)


def collect_namespaces(client: AdminClient, tenant: str, *, timeout: float) -> list[str]:
    """GET /admin/v2/namespaces/{tenant} -> ["tenant/ns", ...]; NameRefused (before any
    request) for a tenant name Pulsar would refuse, as for every name below."""
    path = f"/admin/v2/namespaces/{entity_segment('tenant', tenant)}"
    return _expect_list(client.get_json(path, timeout=timeout), "GET", path)


def collect_bundles(client: AdminClient, namespace: str, *, timeout: float) -> Any:
    """GET /admin/v2/namespaces/{tenant}/{namespace}/bundles

    Answer: {"boundaries": ["0x00000000", ..., "0xffffffff"], "numBundles": N}.
    """
    path = f"/admin/v2/namespaces/{namespace_path(namespace)}/bundles"
    payload = client.get_json(path, timeout=timeout)
    try:
        parse_boundaries(payload)
    except ValueError as exc:
        raise AdminApiError("GET", path, None, repr(payload), str(exc)) from None
    return payload


def collect_topic_names(client: AdminClient, namespace: str, *, timeout: float) -> list[Any]:
    """GET /admin/v2/persistent/{tenant}/{namespace}?includeSystemTopic=true

    Every persistent topic of the namespace, partitions included (Pulsar lists each
    partition of a partitioned topic as its own topic). The items are as answered (names
    are checked, and the rest refused, as the snapshot is built), so a name that is not
    valid text is not made into another one.
    """
    path = f"/admin/v2/persistent/{namespace_path(namespace)}"
    payload = client.get_json(path, params={"includeSystemTopic": "true"}, timeout=timeout)
    return _listed(payload, "GET", path)


def collect_partitioned_topics(client: AdminClient, namespace: str, *, timeout: float) -> list[Any]:
    """GET /admin/v2/persistent/{tenant}/{namespace}/partitioned?includeSystemTopic=true
    (items as answered, as `collect_topic_names`)"""
    path = f"/admin/v2/persistent/{namespace_path(namespace)}/partitioned"
    payload = client.get_json(path, params={"includeSystemTopic": "true"}, timeout=timeout)
    return _listed(payload, "GET", path)


def collect_partition_count(client: AdminClient, admin_path: str, *, timeout: float) -> int:
    """GET /admin/v2/persistent/{tenant}/{namespace}/{topic}/partitions -> its partition count.

    Only used for a partitioned topic whose partitions the namespace listing did not show.
    """
    path = f"{admin_path}/partitions"
    payload = as_dict(client.get_json(path, timeout=timeout))
    count = payload.get("partitions")
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_PARTITIONS:
        raise AdminApiError(
            "GET", path, None, repr(payload), f"expected partitions: N, 0 <= N <= {MAX_PARTITIONS}"
        )
    return count


def parse_boundaries(payload: Any) -> tuple[int, ...]:
    """The bundle boundaries of a bundles answer; ValueError if malformed."""
    if not isinstance(payload, Mapping):
        raise ValueError("expected a JSON object with boundaries")
    try:
        return bundles_model.parse_bundles(payload)
    except ModelError as exc:
        raise ValueError(str(exc)) from None


def parse_bundle_key(key: str) -> tuple[str, str, int, int] | None:
    """`tenant/ns/0x00000000_0x40000000` -> (namespace, bundle, lower, upper); None if not one."""
    namespace, _, bundle = key.rpartition("/")
    try:
        parsed = bundles_model.parse_bundle_name(bundle)
    except ModelError:
        return None
    return (namespace, bundle, parsed.lower, parsed.upper) if namespace else None


def parse_bundles(namespace: str, payload: Any) -> tuple[BundleRecord, ...]:
    """One BundleRecord per bundle of the namespace (owner filled in later)."""
    tenant = namespace.split("/", 1)[0]
    return tuple(
        BundleRecord(namespace, tenant, b.name, b.lower, b.upper)
        for b in bundles_model.bundle_ranges(parse_boundaries(payload))
    )


def bundle_for(topic: str, boundaries: Sequence[int]) -> str:
    """The bundle name holding `topic` (CRC-32 of the full name; see core.bundles)."""
    return bundles_model.topic_bundle(boundaries, topic).name


def bundles_of_full_names(topics: Sequence[str], boundaries: tuple[int, ...]) -> list[str | None]:
    """`bundle_for` of each canonical full name (`TopicName.topic`) given, with boundaries
    that `parse_boundaries` gave (so checked already): no parse, no check, one binary search
    of them all (a namespace's topics of a poll), `core.bundles.bundle_index`'s rule. None for
    the one hash no bundle holds (0xffffffff: the broker cannot serve that topic)."""
    names = [bundles_model.bundle_name(a, b) for a, b in itertools.pairwise(boundaries)]
    hashes = np.fromiter(map(topic_bundle_hash, topics), dtype=np.int64, count=len(topics))
    index = np.searchsorted(np.asarray(boundaries, dtype=np.int64), hashes, side="right") - 1
    full = (hashes >= bundles_model.FULL_LOWER) & (hashes < bundles_model.FULL_UPPER)
    index[~full | (index < 0) | (index >= len(names))] = len(names)  # the None below
    choices = [*names, None]
    return [choices[i] for i in index.tolist()]


@dataclass(frozen=True, slots=True)
class NamespaceListing:
    """What the per-namespace calls answered; None where a call failed."""

    namespace: str
    bundles: tuple[BundleRecord, ...] | None
    boundaries: tuple[int, ...] | None
    topics: tuple[str, ...] | None
    partitioned: tuple[str, ...] | None


def missing_partitioned(listing: NamespaceListing) -> list[str]:
    """Partitioned topics whose partitions the namespace listing did not include (names the
    broker would refuse are left out: no call can ask for them)."""
    parents = {t.rpartition("-partition-")[0] for t in listing.topics or () if "-partition-" in t}
    return [
        parent
        for parent in listing.partitioned or ()
        if parent not in parents and _valid_topic(parent)
    ]


def _valid_topic(name: str) -> bool:
    try:
        parse_topic_name(name)
    except ValueError:
        return False
    return True


def owned_bundles_by_namespace(
    owners: Mapping[str, str], namespaces: Sequence[str]
) -> dict[str, dict[str, str]]:
    """{namespace: {bundle: broker}} from {"tenant/ns/bundle": broker}, for these namespaces."""
    wanted = set(namespaces)
    found: dict[str, dict[str, str]] = {}
    for key, broker in owners.items():
        parsed = parse_bundle_key(key)
        if parsed and parsed[0] in wanted:
            found.setdefault(parsed[0], {})[parsed[1]] = broker
    return found
