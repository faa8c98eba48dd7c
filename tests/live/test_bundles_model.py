"""The bundle model places topics where a real Pulsar broker does, before and after splits
(4.0.7, and 3.0.7 and 4.2.4 for the lookups and splits).

Each test works in its own namespace so splits disturb nobody. The broker's answer for a
topic is `GET /lookup/v2/topic/{domain}/{tenant}/{ns}/{topic}/bundle`, asked for every name
through a bounded thread pool.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import pytest
import requests

from pulsar_lens.core.bundles import (
    FULL_UPPER,
    BundleRange,
    default_boundaries,
    parse_bundles,
    split_point,
    topic_bundle,
    topic_bundles,
    with_split,
)
from pulsar_lens.core.errors import ModelError
from pulsar_lens.core.hashing import topic_bundle_hash
from pulsar_lens.lab.localpulsar import LocalPulsar
from tests.brokers import LIVE_LINES, BrokerPool
from tests.crcforge import forge_name

TENANT = "public"
WORKERS = 8
SPLIT = "split?unload=false&splitAlgorithmName=range_equally_divide"

NewNamespace = Callable[[int], str]


def create_namespace(admin_url: str, num_bundles: int) -> str:
    """Creates `public/<unique>` with N bundles and returns "public/<ns>"."""
    namespace = f"{TENANT}/lens-bundles-{uuid.uuid4().hex[:8]}"
    resp = requests.put(
        f"{admin_url}/admin/v2/namespaces/{namespace}",
        json={"bundles": {"numBundles": num_bundles}},
        timeout=10,
    )
    assert resp.status_code == 204, resp.text
    return namespace


@pytest.fixture
def new_namespace(pulsar: LocalPulsar) -> NewNamespace:
    """`create_namespace` on the 4.0 standalone."""
    return lambda num_bundles: create_namespace(pulsar.admin_url, num_bundles)


@pytest.fixture(params=LIVE_LINES)
def release_broker(request: pytest.FixtureRequest, broker_pool: BrokerPool) -> LocalPulsar:
    """The default standalone of each release line the tests run (4.0.7, 3.0.7, 4.2.4)."""
    return broker_pool.get(None, version=str(request.param))


def broker_boundaries(admin_url: str, namespace: str) -> tuple[int, ...]:
    resp = requests.get(f"{admin_url}/admin/v2/namespaces/{namespace}/bundles", timeout=10)
    resp.raise_for_status()
    return parse_bundles(resp.json())


def lookup_path(topic: str) -> str:
    domain, rest = topic.split("://", 1)
    tenant, namespace, local = rest.split("/", 2)
    return f"/lookup/v2/topic/{domain}/{tenant}/{namespace}/{quote(local, safe='')}"


def lookup_bundle(admin_url: str, topic: str) -> tuple[int, str]:
    """(status, body) of the broker's bundle lookup; the body is the bare bundle name."""
    resp = requests.get(f"{admin_url}{lookup_path(topic)}/bundle", timeout=10)
    return resp.status_code, resp.text.strip().strip('"')


def lookup_all(admin_url: str, topics: Sequence[str]) -> dict[str, str]:
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        answers = list(pool.map(lambda t: lookup_bundle(admin_url, t), topics))
    failed = {t: a for t, a in zip(topics, answers, strict=True) if a[0] != 200}
    assert not failed, f"lookups failed: {list(failed.items())[:3]}"
    return {t: body for t, (_, body) in zip(topics, answers, strict=True)}


def own_every_bundle(admin_url: str, namespace: str, boundaries: Sequence[int]) -> None:
    """Look up one topic per bundle so the broker owns (loads) each of them."""
    for lower in boundaries[:-1]:
        topic = forge_name(f"persistent://{namespace}/own-", lower)
        resp = requests.get(f"{admin_url}{lookup_path(topic)}", timeout=30)
        assert resp.status_code == 200, resp.text


def split_bundle(admin_url: str, namespace: str, bundle: BundleRange) -> None:
    resp = requests.put(
        f"{admin_url}/admin/v2/namespaces/{namespace}/{bundle.name}/{SPLIT}", timeout=60
    )
    assert resp.status_code == 204, resp.text


SCRIPTS = (
    "abcxyz0123456789-_.",
    "äöüßéèçñ",
    "абвгдежзий",
    "αβγδεζηθ",
    "主题消息队列分区",
    "トピックカタ",
    "🙂🚀🎉🌍",
)


def topic_names(namespace: str, count: int, *, extra_edges: Sequence[int] = ()) -> list[str]:
    """Random ASCII, non-ASCII, long, partition and non-persistent names, plus names whose
    CRC-32 sits exactly on, just below and just above each boundary."""
    rng = random.Random(count)  # the same names on every run
    names: dict[str, None] = {}
    i = 0
    while len(names) < count:
        alphabet = SCRIPTS[i % len(SCRIPTS)] + SCRIPTS[0]
        length = rng.choice((1, 5, 12, 40, 200, 400)) if i % 5 else rng.randint(3, 30)
        local = "".join(rng.choice(alphabet) for _ in range(length))
        if not local.strip("."):
            local = f"dots{local}"  # "." and ".." are path segments, not topic names
        if i % 11 == 0:
            local += f"-partition-{i % 7}"
        domain = "non-persistent" if i % 13 == 0 else "persistent"
        names[f"{domain}://{namespace}/{local}"] = None
        i += 1
    for edge in (*default_boundaries(10)[:-1], *extra_edges):
        for target in (edge - 1, edge, edge + 1):
            if 0 <= target < FULL_UPPER:
                names[forge_name(f"persistent://{namespace}/edge-{target:08x}-", target)] = None
    return list(names)


def predicted(boundaries: Sequence[int], topics: Sequence[str]) -> dict[str, str]:
    return {t: bundle.name for t, bundle in topic_bundles(boundaries, topics).items()}


@pytest.mark.parametrize("count", [1, 3, 4, 7, 10, 16])
def test_bundles_default_boundaries_match_broker(
    pulsar: LocalPulsar, new_namespace: NewNamespace, count: int
) -> None:
    namespace = new_namespace(count)
    assert broker_boundaries(pulsar.admin_url, namespace) == default_boundaries(count)


def test_bundles_lookup_matches_for_500_topics(release_broker: LocalPulsar) -> None:
    admin_url = release_broker.admin_url
    namespace = create_namespace(admin_url, 10)
    boundaries = broker_boundaries(admin_url, namespace)
    topics = topic_names(namespace, 500)
    assert len(topics) >= 500
    assert lookup_all(admin_url, topics) == predicted(boundaries, topics)


def test_bundles_hash_positions_equal_crc32(
    pulsar: LocalPulsar, new_namespace: NewNamespace
) -> None:
    # the bulk endpoint lists only existing topics of an owned bundle, with the broker's hash
    namespace = new_namespace(1)
    topics = [
        t
        for t in topic_names(namespace, 40)
        if t.startswith("persistent://") and "-partition-" not in t
    ]
    for topic in topics:
        path = "/admin/v2/persistent/" + quote(topic.removeprefix("persistent://"), safe="/")
        resp = requests.put(f"{pulsar.admin_url}{path}", timeout=30)
        assert resp.status_code == 204, resp.text
    bundle = "0x00000000_0xffffffff"
    resp = requests.get(
        f"{pulsar.admin_url}/admin/v2/namespaces/{namespace}/{bundle}/topicHashPositions",
        timeout=30,
    )
    resp.raise_for_status()
    positions = resp.json()["topicHashPositions"]
    assert {t: positions.get(t) for t in topics} == {t: topic_bundle_hash(t) for t in topics}


def test_bundles_last_boundary_hash_fails_on_broker_and_model(pulsar: LocalPulsar) -> None:
    topic = forge_name("persistent://public/default/lens-top-", FULL_UPPER)
    status, body = lookup_bundle(pulsar.admin_url, topic)
    assert status == 500 and "IndexOutOfBoundsException" in body
    with pytest.raises(ModelError, match="0xffffffff"):
        topic_bundle(default_boundaries(4), topic)


def test_bundles_split_matches_prediction_and_lookups(release_broker: LocalPulsar) -> None:
    pulsar = release_broker
    namespace = create_namespace(pulsar.admin_url, 4)
    boundaries = broker_boundaries(pulsar.admin_url, namespace)
    last = BundleRange(boundaries[-2], boundaries[-1])
    first = BundleRange(boundaries[0], boundaries[1])
    expected = with_split(boundaries, last)
    half = BundleRange(expected[-2], expected[-1])  # the upper half, split once more
    expected = with_split(with_split(expected, half), first)
    # names on the boundaries the splits will create
    new_edges = [split_point(last), split_point(half), split_point(first)]
    topics = topic_names(namespace, 500, extra_edges=new_edges)
    assert lookup_all(pulsar.admin_url, topics) == predicted(boundaries, topics)

    own_every_bundle(pulsar.admin_url, namespace, boundaries)
    split_bundle(pulsar.admin_url, namespace, last)
    own_every_bundle(pulsar.admin_url, namespace, broker_boundaries(pulsar.admin_url, namespace))
    split_bundle(pulsar.admin_url, namespace, half)
    split_bundle(pulsar.admin_url, namespace, first)

    after = broker_boundaries(pulsar.admin_url, namespace)
    assert after == expected
    assert lookup_all(pulsar.admin_url, topics) == predicted(after, topics)
