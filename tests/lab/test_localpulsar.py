"""Choosing a JDK for the local broker, and its command line, without starting one."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulsar_lens.core.errors import LocalPulsarError
from pulsar_lens.lab import runtime
from pulsar_lens.lab.localpulsar import JVM_FLAGS, LocalPulsar
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
