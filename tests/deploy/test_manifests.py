"""deploy/: the Kubernetes manifests pass the API schema (strict) and agree with the
Dockerfile and with the code; the compose file agrees with both too. No cluster, no network:
only the /metrics server is started, on 127.0.0.1."""

from __future__ import annotations

import re
import shlex
import tomllib
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from pulsar_lens.cli.serve_cmd import DEFAULT_PORT
from pulsar_lens.exporter.collector import LensCollector
from pulsar_lens.exporter.server import SERVE_PORT, start_metrics_server
from pulsar_lens.lab.runtime import PULSAR_VERSION

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
DOCKERFILE = ROOT / "Dockerfile"
# the oldest Kubernetes release still supported upstream, and the newest the schemas cover
K8S_VERSIONS = ("1.35", "1.37")
SECRET_WORDS = ("TOKEN", "PASSWORD", "SECRET", "CREDENTIAL")


# --- the Dockerfile, as far as the manifests depend on it ---------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the final stage, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    steps = [tuple(ln.split(None, 1)) for ln in lines]
    last_from = max(i for i, step in enumerate(steps) if step[0].upper() == "FROM")
    return [(step[0].upper(), step[1] if len(step) > 1 else "") for step in steps[last_from:]]


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for op, args in dockerfile_instructions():
        if op == "ENV":
            for pair in shlex.split(args):
                name, _, value = pair.partition("=")
                env[name] = value
    return env


def dockerfile_words(op: str) -> list[str]:
    words: list[str] = []
    for name, args in dockerfile_instructions():
        if name == op:
            words.extend(yaml.safe_load(args) if args.startswith("[") else args.split())
    return words


def dockerfile_user() -> tuple[str, int, str]:
    """(name, uid, home) of the USER the image runs as, from its useradd line."""
    (user,) = dockerfile_words("USER")
    for op, args in dockerfile_instructions():
        if op == "RUN" and "useradd" in args:
            words = shlex.split(args.split("useradd", 1)[1].split("&&")[0])
            uid = int(words[words.index("--uid") + 1])
            name = next(w for w in reversed(words) if not w.startswith("-"))
            if name == user:
                assert "--create-home" in words or "-m" in words
                return name, uid, f"/home/{name}"
    raise AssertionError(f"no useradd line creates the image's user {user!r}")


def dockerfile_copied_packages() -> list[Path]:
    """The source folders the image installs (its build stage's COPY lines)."""
    folders = []
    for line in DOCKERFILE.read_text().splitlines():
        parts = line.split()
        if parts[:1] == ["COPY"] and len(parts) == 3 and (ROOT / parts[1]).is_dir():
            folders.append(ROOT / parts[1])
    return folders


# --- what the code reads ------------------------------------------------------------------


def env_names_read_by_code() -> set[str]:
    """Every PULSAR_* string literal in the packages the image installs."""
    literal = re.compile(r"""(["'])(PULSAR_[A-Z0-9_]+)\1""")
    names: set[str] = set()
    for folder in dockerfile_copied_packages():
        for path in folder.rglob("*.py"):
            names.update(m.group(2) for m in literal.finditer(path.read_text()))
    return names


def pyproject_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


# --- the manifests ------------------------------------------------------------------------


def k8s_files() -> list[Path]:
    return sorted(p for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")


def k8s_docs() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in k8s_files():
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def one(kind: str) -> dict[str, Any]:
    (doc,) = [d for d in k8s_docs() if d["kind"] == kind]
    return doc


def pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = one("Deployment")["spec"]["template"]["spec"]
    return spec


def container() -> dict[str, Any]:
    (only,) = pod_spec()["containers"]
    return dict(only)


def container_ports() -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in container()["ports"]}


def deployed_env() -> dict[str, str]:
    """The container's environment: the ConfigMaps it loads, then its own `env` entries."""
    maps = {d["metadata"]["name"]: d for d in k8s_docs() if d["kind"] == "ConfigMap"}
    env: dict[str, str] = {}
    for source in container().get("envFrom", []):
        env.update(maps[source["configMapRef"]["name"]]["data"])
    for entry in container().get("env", []):
        env[entry["name"]] = entry.get("value", "<from valueFrom>")
    return env


def mounts() -> dict[str, dict[str, Any]]:
    return {m["mountPath"]: m for m in container()["volumeMounts"]}


def volume(name: str) -> dict[str, Any]:
    (found,) = [v for v in pod_spec()["volumes"] if v["name"] == name]
    return dict(found)


def compose(*names: str) -> dict[str, Any]:
    """The compose files merged the way `docker compose -f A -f B` merges these keys."""
    merged: dict[str, Any] = {}
    for name in names:
        merged = _merge(merged, yaml.safe_load((DEPLOY / name).read_text()))
    return merged


def _merge(base: Any, extra: Any) -> Any:
    if isinstance(base, dict) and isinstance(extra, dict):
        out = dict(base)
        for key, value in extra.items():
            out[key] = _merge(base[key], value) if key in base else value
        return out
    if isinstance(base, list) and isinstance(extra, list):
        return base + [item for item in extra if item not in base]
    return extra


def lens_service(*names: str) -> dict[str, Any]:
    service: dict[str, Any] = compose(*names)["services"]["pulsar-lens"]
    return service


def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key), item
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


# --- Kubernetes: schema and wiring --------------------------------------------------------


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_k8s_every_document_passes_the_strict_api_schema(version: str) -> None:
    docs = k8s_docs()
    assert {d["kind"] for d in docs} >= {
        "Namespace",
        "ServiceAccount",
        "ConfigMap",
        "PersistentVolumeClaim",
        "Deployment",
        "Service",
    }
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_k8s_strict_validation_rejects_an_unknown_field() -> None:
    deployment = one("Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFileSystem"] = True
    with pytest.raises(kubernetes_validate.ValidationError, match="readOnlyRootFileSystem"):
        kubernetes_validate.validate(deployment, K8S_VERSIONS[0], strict=True)


def test_k8s_kustomization_lists_every_manifest_and_the_namespace() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == [p.name for p in k8s_files()]
    namespace = one("Namespace")["metadata"]["name"]
    assert kustomization["namespace"] == namespace
    assert {d["metadata"].get("namespace", namespace) for d in k8s_docs()} == {namespace}


def test_k8s_references_resolve_to_the_documents_here() -> None:
    spec = pod_spec()
    names = {(d["kind"], d["metadata"]["name"]) for d in k8s_docs()}
    assert ("ServiceAccount", spec["serviceAccountName"]) in names
    assert ("PersistentVolumeClaim", volume("store")["persistentVolumeClaim"]["claimName"]) in names
    for source in container()["envFrom"]:
        assert ("ConfigMap", source["configMapRef"]["name"]) in names
    deployment = one("Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert one("Service")["spec"]["selector"].items() <= labels.items()


def test_k8s_one_replica_recreated_since_the_store_has_one_writer() -> None:
    deployment = one("Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert one("PersistentVolumeClaim")["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_k8s_image_is_this_release() -> None:
    version = pyproject_version()
    assert container()["image"] == f"pulsar-lens:{version}"
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert kustomization["images"] == [{"name": "pulsar-lens", "newTag": version}]
    assert "command" not in container() and "args" not in container()  # the image's CMD runs


# --- Kubernetes: agreement with the Dockerfile and the code -------------------------------


def test_k8s_container_ports_are_the_images() -> None:
    exposed = sorted(int(p) for p in dockerfile_words("EXPOSE"))
    assert sorted(container_ports().values()) == exposed
    assert container_ports() == {"dashboard": DEFAULT_PORT, "metrics": SERVE_PORT}
    cmd = dockerfile_words("CMD")
    assert cmd[cmd.index("--port") + 1] == str(DEFAULT_PORT)
    assert deployed_env()["PULSAR_LENS_METRICS_PORT"] == str(SERVE_PORT)


def test_k8s_service_ports_reach_the_named_container_ports() -> None:
    ports = container_ports()
    service = {p["name"]: p for p in one("Service")["spec"]["ports"]}
    assert set(service) == set(ports)
    for name, port in service.items():
        assert port["port"] == ports[name]
        assert ports[port["targetPort"]] == ports[name]


def test_k8s_env_names_are_ones_the_code_reads() -> None:
    read = env_names_read_by_code()
    assert {"PULSAR_ADMIN_URL", "PULSAR_LENS_STORE", "PULSAR_ADMIN_TOKEN_FILE"} <= read
    unknown = sorted(set(deployed_env()) - read)
    assert unknown == [], f"deployed settings no code reads: {unknown}"
    unknown_in_image = sorted(
        n for n in dockerfile_env() if n.startswith("PULSAR_") and n not in read
    )
    assert unknown_in_image == [], f"Dockerfile settings no code reads: {unknown_in_image}"


def test_k8s_no_service_links_in_the_settings_namespace() -> None:
    # Services named pulsar-lens or pulsar would inject PULSAR_LENS_PORT, PULSAR_SERVICE_HOST, ...
    assert pod_spec()["enableServiceLinks"] is False


def test_k8s_env_agrees_with_the_images_env() -> None:
    image = dockerfile_env()
    clashes = {k: (v, image[k]) for k, v in deployed_env().items() if k in image and v != image[k]}
    assert clashes == {}
    # probes and scrapes come from outside the pod: both servers must listen beyond loopback
    assert image["PULSAR_LENS_BIND_ADDRESS"] == "0.0.0.0"
    assert image["PULSAR_LENS_METRICS_ADDRESS"] == "0.0.0.0"


def test_k8s_volume_mounts_are_the_images_volumes() -> None:
    volumes = dockerfile_words("VOLUME")
    assert set(volumes) <= set(mounts())
    image = dockerfile_env()
    assert image["PULSAR_LENS_PLUGIN_DIRS"] in volumes
    store_mount = mounts()[str(Path(image["PULSAR_LENS_STORE"]).parent)]
    assert store_mount["name"] == "store" and not store_mount.get("readOnly", False)
    assert mounts()[image["PULSAR_LENS_PLUGIN_DIRS"]].get("readOnly") is True


def test_k8s_read_only_root_leaves_tmp_home_and_store_writable() -> None:
    assert container()["securityContext"]["readOnlyRootFilesystem"] is True
    _, _, home = dockerfile_user()
    writable = {path for path, m in mounts().items() if not m.get("readOnly", False)}
    assert writable == {"/tmp", home, str(Path(dockerfile_env()["PULSAR_LENS_STORE"]).parent)}
    for path in ("/tmp", home):
        assert "emptyDir" in volume(mounts()[path]["name"])


def test_k8s_runs_as_the_images_user_under_the_restricted_profile() -> None:
    _, uid, _ = dockerfile_user()
    pod = pod_spec()["securityContext"]
    box = container()["securityContext"]
    assert pod["runAsNonRoot"] is True and box["runAsNonRoot"] is True
    assert pod["runAsUser"] == uid and box["runAsUser"] == uid
    assert pod["fsGroup"] == uid  # the store volume becomes writable by that user
    assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
    assert box["seccompProfile"] == {"type": "RuntimeDefault"}
    assert box["allowPrivilegeEscalation"] is False
    assert box["capabilities"] == {"drop": ["ALL"]}
    assert "privileged" not in box and "hostNetwork" not in pod and "hostPath" not in str(pod)
    labels = one("Namespace")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert one("ServiceAccount")["automountServiceAccountToken"] is False


def test_k8s_requests_and_limits_are_set() -> None:
    resources = container()["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert set(resources["limits"]) == {"cpu", "memory"}


# --- Kubernetes: probes and scrapes point at what the app serves -------------------------


def test_k8s_probes_use_streamlits_health_path() -> None:
    from streamlit.web.server.starlette.starlette_routes import ROUTE_HEALTH

    served = "/" + ROUTE_HEALTH
    probes = [container()[k] for k in ("startupProbe", "readinessProbe", "livenessProbe")]
    for probe in probes:
        assert probe["httpGet"]["path"] == served
        assert container_ports()[probe["httpGet"]["port"]] == DEFAULT_PORT
    # the same path `serve` waits on before it reports ready, and the image's HEALTHCHECK
    assert f'"{served}"' in (ROOT / "cli" / "serve_cmd.py").read_text().replace("{url}", "")
    assert f":{DEFAULT_PORT}{served}" in " ".join(dockerfile_words("HEALTHCHECK"))


def test_k8s_scrape_annotations_name_the_metrics_endpoint(tmp_path: Path) -> None:
    from pulsar_lens.core.store import Store

    pod = one("Deployment")["spec"]["template"]["metadata"]["annotations"]
    service = one("Service")["metadata"]["annotations"]
    for notes in (pod, service):
        assert notes["prometheus.io/scrape"] == "true"
        assert int(notes["prometheus.io/port"]) == container_ports()["metrics"]
    server = start_metrics_server(LensCollector(Store(tmp_path)), address="127.0.0.1", port=0)
    try:
        url = f"http://127.0.0.1:{server.port}{service['prometheus.io/path']}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert answer.status == 200
            assert "pulsar_lens_store_quarantined_files" in answer.read().decode()
    finally:
        server.close()


# --- Kubernetes: the token is referenced, never inlined -----------------------------------


def test_k8s_the_token_comes_from_a_secret_file() -> None:
    assert not [d for d in k8s_docs() if d["kind"] == "Secret"]
    token_file = Path(deployed_env()["PULSAR_ADMIN_TOKEN_FILE"])
    mount = mounts()[str(token_file.parent)]
    assert mount["readOnly"] is True
    secret = volume(mount["name"])["secret"]
    assert secret.get("optional", False) is False
    readme = (DEPLOY / "README.md").read_text()
    command = f"create secret generic {secret['secretName']} --from-file={token_file.name}="
    assert command in readme


def test_k8s_no_secret_value_in_any_manifest() -> None:
    for doc in k8s_docs():
        for key, value in _walk(doc):
            if any(word in key.upper() for word in SECRET_WORDS) and isinstance(value, str):
                assert key.endswith("_FILE") or key == "secretName", (key, value)
    for name, value in deployed_env().items():
        assert not re.match(r"^[a-z][a-z0-9+.-]*://[^/@]*@", value), f"{name} carries userinfo"
    assert not [e for e in container()["env"] if "valueFrom" in e and "TOKEN" in e["name"]]


# --- Compose ------------------------------------------------------------------------------


def test_compose_pulsar_is_a_pinned_40_standalone_with_a_health_check() -> None:
    pulsar = compose("compose.yaml")["services"]["pulsar"]
    assert re.fullmatch(r"apachepulsar/pulsar:4\.0\.\d+", pulsar["image"])
    assert pulsar["image"].endswith(f":{PULSAR_VERSION}")  # the release the live tests prove
    assert pulsar["command"][:2] == ["bin/pulsar", "standalone"]
    check = " ".join(pulsar["healthcheck"]["test"])
    assert re.search(r"http://localhost:8080/admin/v2/\S+", check)


def test_compose_builds_the_repos_dockerfile() -> None:
    build = lens_service("compose.yaml")["build"]
    context = (DEPLOY / build["context"]).resolve()
    assert (context / build.get("dockerfile", "Dockerfile")).resolve() == DOCKERFILE
    assert set(build.get("args", {})) <= {arg.split("=")[0] for arg in dockerfile_words("ARG")}
    assert lens_service("compose.yaml")["image"] == f"pulsar-lens:{pyproject_version()}"


def test_compose_ports_and_volumes_are_the_images() -> None:
    lens = lens_service("compose.yaml")
    container_side = sorted(int(p.rsplit(":", 1)[1]) for p in lens["ports"])
    assert container_side == sorted(int(p) for p in dockerfile_words("EXPOSE"))
    assert all(p.startswith("127.0.0.1:") for p in lens["ports"])
    named = {v.split(":")[1]: v.split(":")[0] for v in lens["volumes"]}
    assert set(named) == set(dockerfile_words("VOLUME"))
    assert set(named.values()) <= set(compose("compose.yaml")["volumes"])
    _, _, home = dockerfile_user()
    assert lens["read_only"] is True and {"/tmp", home} <= set(lens["tmpfs"])
    assert lens["cap_drop"] == ["ALL"]


def test_compose_lens_talks_to_the_pulsar_service_once_it_is_healthy() -> None:
    lens = lens_service("compose.yaml")
    env = lens["environment"]
    assert env["PULSAR_ADMIN_URL"] == "http://pulsar:8080"
    # the broker advertises its hostname, and the collector calls the brokers it lists
    assert compose("compose.yaml")["services"]["pulsar"]["hostname"] == "pulsar"
    assert env["PULSAR_SERVICE_URL"] == "pulsar://pulsar:6650"
    assert lens["depends_on"] == {"pulsar": {"condition": "service_healthy"}}
    assert lens["restart"] == "unless-stopped"
    assert lens["init"] is True


@pytest.mark.parametrize("files", [("compose.yaml",), ("compose.yaml", "compose.token.yaml")])
def test_compose_env_names_are_ones_the_code_reads(files: tuple[str, ...]) -> None:
    env = lens_service(*files)["environment"]
    unknown = sorted(set(env) - env_names_read_by_code())
    assert unknown == [], f"compose settings no code reads: {unknown}"
    image = dockerfile_env()
    assert {k: v for k, v in env.items() if k in image and v != image[k]} == {}


def test_compose_the_token_is_a_secret_file_never_a_value() -> None:
    assert "PULSAR_ADMIN_TOKEN" not in lens_service("compose.yaml")["environment"]
    merged = compose("compose.yaml", "compose.token.yaml")
    lens = merged["services"]["pulsar-lens"]
    (name,) = lens["secrets"]
    assert lens["environment"]["PULSAR_ADMIN_TOKEN_FILE"] == f"/run/secrets/{name}"
    assert "PULSAR_ADMIN_TOKEN" not in lens["environment"]
    source = merged["secrets"][name]
    assert list(source) == ["file"]
    assert Path(source["file"]).name in (DEPLOY / ".gitignore").read_text().split()
