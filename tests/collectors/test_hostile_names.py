"""Names from the cluster's answers never shape a request path: `pulsar-lens collect --once`
against a fake whose answers name tenants, namespaces, clusters, broker ids, bundles and
topics in every hostile form, checked on the paths the fake was asked for and the errors the
snapshot keeps."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from pulsar_lens.core.names import NAMED_ENTITY, broker_id_problem
from pulsar_lens.core.store import Store
from tests.fake_admin import FakeAdmin, Seen
from tests.lens_cli import run_lens

HOSTILE = {
    "query": "a?b=1",
    "fragment": "a#b",
    "slash": "a/../../clusters",
    "dot": ".",
    "dotdot": "..",
    "encoded-slash": "a%2Fb",
    "percent": "100%",
    "space": "a b",
    "non-ascii": "caf\u00e9",
    "not-utf8": "a\udcff",
    "long": "x" * 2000,
}
VALID_ENTITY = {"long"}  # Pulsar accepts these as tenant, namespace and cluster names
REFUSED_LOCAL = {"dot", "dotdot"}  # topic local names no path can carry

SEG = r"[^/?#]+"
SHAPES = {
    r"/admin/v2/(tenants|clusters|brokers/leaderBroker|brokers/version)": (),
    r"/admin/v2/broker-stats/(topics|metrics|load-report)": (),
    rf"/admin/v2/brokers/(?P<cluster>{SEG})": ("cluster",),
    rf"/admin/v2/brokers/(?P<cluster>{SEG})/(?P<broker>{SEG})/ownedNamespaces": ("cluster",),
    rf"/admin/v2/namespaces/(?P<tenant>{SEG})": ("tenant",),
    rf"/admin/v2/namespaces/(?P<tenant>{SEG})/(?P<ns>{SEG})/bundles": ("tenant", "ns"),
    rf"/admin/v2/persistent/(?P<tenant>{SEG})/(?P<ns>{SEG})(/partitioned)?": ("tenant", "ns"),
    rf"/admin/v2/persistent/(?P<tenant>{SEG})/(?P<ns>{SEG})/(?P<local>{SEG})/"
    r"(stats|partitions)": ("tenant", "ns"),
    # `public/default/a/../x` is a v1 name: cluster `default`, namespace `a`, local `../x`
    rf"/admin/persistent/(?P<tenant>{SEG})/(?P<cluster>{SEG})/(?P<ns>{SEG})/(?P<local>{SEG})/"
    r"(stats|partitions)": ("tenant", "cluster", "ns"),
}
QUERIES = {"", "includeSystemTopic=true", "getEarliestTimeInBacklog=true"}
KEY_SHARED = {
    "msgRateIn": 1.0,
    "subscriptions": {
        "ks": {"type": "Key_Shared", "msgBacklog": 0, "consumers": [{"consumerName": "c"}]}
    },
}


def hostile_cluster(fake: FakeAdmin, name: str) -> None:
    """Every list that names something in a path names `name` too."""
    fake.mutate("/admin/v2/clusters", lambda c: [*c, name])
    fake.mutate("/admin/v2/tenants", lambda t: [*t, name])
    fake.mutate("/admin/v2/namespaces/public", lambda n: [*n, f"public/{name}", f"{name}/x"])
    fake.mutate("/admin/v2/brokers/standalone", lambda b: [*b, name, f"{name}:8080"])
    topic = f"persistent://public/default/{name}"
    fake.mutate("/admin/v2/persistent/public/default/partitioned", lambda p: [*p, topic])
    owned = "/admin/v2/brokers/standalone/127.0.0.1:8080/ownedNamespaces"
    fake.mutate(owned, lambda o: {**o, f"public/default/{name}": {"is_active": True}})

    def bulk(payload: Any) -> Any:
        bundles = payload["public/default"]
        bundles[name] = {"persistent": {f"{topic}-2": KEY_SHARED}}
        next(iter(bundles.values()))["persistent"][topic] = KEY_SHARED
        payload[f"{name}/default"] = {name: {"persistent": {f"persistent://{name}/d/t": {}}}}
        return payload

    fake.mutate("/admin/v2/broker-stats/topics", bulk)


def shape_problems(seen: Seen) -> list[str]:
    """What is wrong with one request the collector sent (nothing, for a well-formed one)."""
    if seen.query not in QUERIES:
        return [f"{seen.path}?{seen.query}: a query no call sends"]
    for shape, entities in SHAPES.items():
        match = re.fullmatch(shape, seen.path)
        if match is None:
            continue
        parts = match.groupdict()
        problems = [
            f"{seen.path}: {key} {value!r} is no valid name"
            for key in entities
            if not NAMED_ENTITY.fullmatch(value := unquote(parts[key])) or value in (".", "..")
        ]
        if parts.get("broker") and broker_id_problem(unquote(parts["broker"])):
            problems.append(f"{seen.path}: broker {parts['broker']!r} is not host:port")
        if parts.get("local") and unquote(parts["local"]) in (".", ".."):
            problems.append(f"{seen.path}: a dot segment")
        return problems
    return [f"{seen.path}: outside the admin API's shapes"]


def errors_of(store: Path) -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = json.loads(Store(store).snapshots()["errors_json"].iloc[0])
    return errors


@pytest.mark.parametrize("form", sorted(HOSTILE))
def test_collect_once_keeps_hostile_names_out_of_request_paths(tmp_path: Path, form: str) -> None:
    name = HOSTILE[form]
    store = tmp_path / "store"
    with FakeAdmin() as fake:
        hostile_cluster(fake, name)
        env = {"PULSAR_ADMIN_URL": fake.url, "PULSAR_LENS_POLL_DEADLINE": "60s"}
        done = run_lens("collect", "--once", "--store", str(store), env=env, timeout=120)
        seen = list(fake.requests)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [p for s in seen for p in shape_problems(s)] == []
    asked = {unquote(s.path) for s in seen}
    if form not in REFUSED_LOCAL and form != "not-utf8":  # a valid local name is asked, encoded
        if "/" not in name:  # else a v1 name, of a namespace (public/default/a) not polled
            assert any(p.endswith(f"default/{name}-2/stats") for p in asked), sorted(asked)
        assert any(p.endswith(f"default/{name}/partitions") for p in asked), sorted(asked)
    refused = [e for e in errors_of(store) if "not asked for" in e["message"]]
    families = {e["endpoint"] for e in refused}
    expected = {"brokers"} | (set() if form in VALID_ENTITY else {"clusters", "tenants"})
    expected |= set() if form in VALID_ENTITY else {"namespaces"}
    assert expected <= families, refused
    if form in REFUSED_LOCAL:  # left out as the snapshot is built, before a path is made
        lines = [e["message"] for e in errors_of(store) if e["endpoint"] == "refused"]
        assert any("has a . or .. segment" in line for line in lines), lines
    if form in VALID_ENTITY:
        assert f"/admin/v2/namespaces/{name}" in asked  # valid names are asked for, as they are
