"""Choosing a JDK for the local broker, and its command line, without starting one."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulsar_lens.core.errors import LocalPulsarError
from pulsar_lens.lab import localpulsar, runtime
from pulsar_lens.lab.cluster import LocalPulsarCluster
from pulsar_lens.lab.localpulsar import LocalPulsar
from pulsar_lens.lab.processes import JVM_FLAGS
from pulsar_lens.lab.runtime import find_java, java_supported


def fake_java(folder: Path, version: str) -> Path:
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2026-01-01' >&2\n")
    java.chmod(0o755)
    return java


@pytest.mark.parametrize(
    ("version", "ok"),
    [
        ((17, 0, 15), False),  # affected by JDK-8351933
        ((17, 0, 17), True),
        ((17, 0, 21, 1), True),
        ((21, 0, 7), False),
        ((21, 0, 8), True),
        ((25, 0, 3), False),  # 4.0 is not tested there and needs flags 17 rejects
        ((11, 0, 20), False),
    ],
)
def test_java_supported_follows_pulsar_4_0(version: tuple[int, ...], ok: bool) -> None:
    assert java_supported(version) is ok


def test_find_java_skips_an_unsupported_java_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = fake_java(tmp_path / "temurin-25", "25.0.3").parent.parent
    good = fake_java(tmp_path / "jdk17", "17.0.21.1")
    monkeypatch.setenv("JAVA_HOME", str(home))
    monkeypatch.setenv("PATH", str(good.parent))
    assert find_java() == str(good)


def test_find_java_names_what_it_saw_when_nothing_fits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = fake_java(tmp_path / "jdk17", "17.0.15")
    monkeypatch.setenv("PATH", str(old.parent))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(runtime, "JVM_DIR", tmp_path / "no-jvms")
    with pytest.raises(LocalPulsarError, match=r"17\.0\.15.*openjdk-17-jdk-headless"):
        find_java()


def test_command_pins_loopback_charset_and_extra_jvm_options(tmp_path: Path) -> None:
    broker = LocalPulsar(data_dir=tmp_path, jvm_options=("-Dfile.encoding=US-ASCII",))
    broker.web_port, broker.broker_port, broker.bookie_port = 1, 2, 3
    cmd = broker.command("java", tmp_path / "lib")
    assert "-Dfile.encoding=UTF-8" in JVM_FLAGS
    # later -D flags win in the JVM, so a test's option overrides the pinned charset
    assert cmd.index("-Dfile.encoding=US-ASCII") > cmd.index("-Dfile.encoding=UTF-8")
    assert cmd[cmd.index("-a") + 1] == "127.0.0.1"
    assert "org.apache.pulsar.PulsarStandaloneStarter" in cmd
    # what the JVM unpacks (RocksDB's, Netty's native libraries) goes with its data directory
    assert f"-Djava.io.tmpdir={tmp_path / 'tmp'}" in cmd and (tmp_path / "tmp").is_dir()


@pytest.mark.parametrize(
    ("name", "version"),
    [("4.0.7", "4.0.7"), ("4.0", "4.0.7"), ("3.0", "3.0.7"), ("3.0.7", "3.0.7"), ("4.2", "4.2.4")],
)
def test_a_release_is_named_by_its_version_or_its_line(name: str, version: str) -> None:
    assert runtime.release(name).version == version
    assert LocalPulsar(version=name).version == version


def test_an_unknown_release_names_the_ones_the_lab_runs() -> None:
    with pytest.raises(LocalPulsarError, match=r"3\.1\.0.*4\.0\.7 \(4\.0\).*3\.0\.7 \(3\.0\)"):
        runtime.release("3.1.0")


@pytest.mark.parametrize(
    ("java", "pulsar", "ok"),
    [
        ((17, 0, 17), "3.0.7", True),
        ((21, 0, 8), "3.0.7", False),  # 3.0 documents Java 17 for its broker
        ((21, 0, 8), "4.0.7", True),
        ((17, 0, 15), "3.0.7", False),  # JDK-8351933 whatever the release
    ],
)
def test_java_supported_follows_each_release(java: tuple[int, ...], pulsar: str, ok: bool) -> None:
    assert java_supported(java, pulsar) is ok


def test_find_java_for_3_0_passes_over_a_java_21(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = fake_java(tmp_path / "jdk21", "21.0.9").parent.parent
    good = fake_java(tmp_path / "jdk17", "17.0.21.1")
    monkeypatch.setenv("JAVA_HOME", str(home))
    monkeypatch.setenv("PATH", str(good.parent))
    assert find_java("4.0") == str(home / "bin" / "java")
    assert find_java("3.0") == str(good)


def test_each_release_writes_its_own_settings_into_the_standalone_conf(tmp_path: Path) -> None:
    for version, data in (("3.0", tmp_path / "a"), ("4.0", tmp_path / "b")):
        LocalPulsar(data_dir=data, version=version)._write_conf()
    old = (tmp_path / "a" / "conf" / "standalone.conf").read_text()
    new = (tmp_path / "b" / "conf" / "standalone.conf").read_text()
    assert "loadBalancerOverrideBrokerNicSpeedGbps=100" in old.splitlines()
    assert "loadBalancerOverrideBrokerNicSpeedGbps" not in new


def test_assembly_passes_each_release_its_logging_binding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Maven is told the release's version and SLF4J binding; a cached release is not
    assembled again."""
    calls = tmp_path / "calls"
    mvn = tmp_path / "bin" / "mvn"
    mvn.parent.mkdir()
    mvn.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    mvn.chmod(0o755)
    monkeypatch.setenv("PATH", str(mvn.parent))
    monkeypatch.setenv("PULSAR_LENS_CACHE_DIR", str(tmp_path / "cache"))
    assert runtime.ensure_runtime("3.0") == tmp_path / "cache" / "pulsar-3.0.7" / "lib"
    runtime.ensure_runtime("3.0.7")
    runtime.ensure_runtime("4.0")
    lines = calls.read_text().splitlines()
    assert len(lines) == 2
    assert "-Dpulsar.version=3.0.7" in lines[0].split()
    assert "-Dlog4j.slf4j.binding=log4j-slf4j-impl" in lines[0].split()
    assert "-Dlog4j.slf4j.binding=log4j-slf4j2-impl" in lines[1].split()


@pytest.mark.parametrize(
    ("given", "words", "attempts"),
    [
        ({}, "java.net.BindException: Address already in use", 2),  # ours: new ports, new dir
        ({"web_port": 18080}, "java.net.BindException: Address already in use", 1),  # chosen
        ({}, "java.lang.OutOfMemoryError", 1),  # not a port taken: said at once
    ],
)
def test_a_start_whose_port_was_taken_meanwhile_starts_again_on_new_ports(
    given: dict[str, int], words: str, attempts: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A port `free_port` chose can be taken before the JVM binds it (brokers starting side by
    side on a busy machine): a standalone whose ports and data directory are all its own starts
    again, on new ones; one given a port, or failing otherwise, raises at once."""
    seen: list[tuple[int, int, int, Path]] = []

    def spawn_ready(self: LocalPulsar, java: str, lib: Path, timeout: float) -> LocalPulsar:
        assert self.data_dir is not None and self.data_dir.is_dir()
        seen.append((self.web_port, self.broker_port, self.bookie_port, self.data_dir))
        if len(seen) == 1:
            self.stop()  # what the real one does before raising
            raise LocalPulsarError(f"Pulsar exited with code 1 while starting; log tail:\n{words}")
        return self

    monkeypatch.setattr(localpulsar, "find_java", lambda version: "java")
    monkeypatch.setattr(localpulsar, "ensure_runtime", lambda version: Path("lib"))
    monkeypatch.setattr(LocalPulsar, "_spawn_ready", spawn_ready)
    broker = LocalPulsar(**given)  # type: ignore[arg-type]
    if attempts == 1:
        with pytest.raises(LocalPulsarError, match=words.split(": ")[-1]):
            broker.start()
        assert len(seen) == 1
        return
    assert broker.start() is broker and len(seen) == 2
    (first_ports, first_dir), (again_ports, again_dir) = [(s[:3], s[3]) for s in seen]
    assert again_dir != first_dir and not first_dir.exists() and again_dir.is_dir()
    assert first_ports != again_ports and all(again_ports)
    broker.stop()
    assert not again_dir.exists()


@pytest.mark.parametrize(("zk_port", "attempts"), [(0, 2), (2181, 1)])
def test_a_cluster_whose_port_was_taken_meanwhile_starts_again_on_new_ports(
    zk_port: int, attempts: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two-broker cluster does the same as a standalone: its own ports, started again;
    a port given by the caller, not."""
    seen: list[int] = []

    def start_once(self: LocalPulsarCluster, timeout: float) -> LocalPulsarCluster:
        seen.append(self.zk_port)
        if len(seen) == 1:
            self.zk_port = self.zk_port or 41_000  # as the real one chooses its ports
            raise LocalPulsarError(
                "ZooKeeper exited with code 1 while starting; log tail:\n"
                "java.net.BindException: Address already in use"
            )
        return self

    monkeypatch.setattr(LocalPulsarCluster, "_start_once", start_once)
    cluster = LocalPulsarCluster(zk_port=zk_port)
    if attempts == 1:
        with pytest.raises(LocalPulsarError, match="Address already in use"):
            cluster.start()
    else:
        assert cluster.start() is cluster
    assert seen == [zk_port, 0][:attempts]
