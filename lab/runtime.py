"""What a local Pulsar 4.0 broker runs on: a supported JDK, and the broker's jars resolved
from Maven Central with Maven into `~/.cache/pulsar-lens/pulsar-<version>/lib` (Maven's own
downloads stay in `~/.m2`). Standard library only, so the set-up script can ask it before
any virtualenv exists.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from pulsar_lens.core.errors import LocalPulsarError
from pulsar_lens.core.settings import process_environ

log = logging.getLogger(__name__)

PULSAR_VERSION = "4.0.7"
"""The newest 4.0.x whose every artifact Maven Central serves (4.0.8 lacks some)."""

SUPPORTED_JAVA = (((17, 0, 17), (18,)), ((21, 0, 8), (22,)))
"""Java lines Pulsar 4.0 runs on, each from the release that fixes JDK-8351933 (which
destabilises Pulsar); 23+ needs flags that 17 rejects and 4.0 is not tested there."""

RUNTIME_DIR = Path(__file__).with_name("pulsar_runtime")


def cache_root() -> Path:
    env = process_environ()
    base = env.get("PULSAR_LENS_CACHE_DIR") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pulsar-lens"
    )
    return Path(base)


def lib_dir(version: str = PULSAR_VERSION) -> Path:
    return cache_root() / f"pulsar-{version}" / "lib"


def java_version(java: str) -> tuple[int, ...]:
    """The version of a `java` binary as a tuple, e.g. (17, 0, 21, 1)."""
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    match = re.search(r'version "([0-9._]+)', out.stderr + out.stdout)
    if not match:
        raise LocalPulsarError(
            f"cannot read the version of {java}: {out.stderr.strip()[:200]}", process=java
        )
    return tuple(int(p) for p in re.split(r"[._]", match.group(1)) if p.isdigit())


JVM_DIR = Path("/usr/lib/jvm")  # where Debian's JDK packages install


def java_supported(version: tuple[int, ...]) -> bool:
    return any(low <= version < high for low, high in SUPPORTED_JAVA)


def find_java() -> str:
    """A `java` Pulsar 4.0 runs well on: $JAVA_HOME first, then PATH, then /usr/lib/jvm."""
    candidates = []
    java_home = process_environ().get("JAVA_HOME")
    if java_home:
        candidates.append(os.path.join(java_home, "bin", "java"))
    found = shutil.which("java")
    if found:
        candidates.append(found)
    candidates.extend(str(p) for p in sorted(JVM_DIR.glob("*/bin/java")))
    seen = []
    for java in candidates:
        if os.path.exists(java):
            version = java_version(java)
            if java_supported(version):
                return java
            seen.append(f"{java} ({'.'.join(map(str, version))})")
    raise LocalPulsarError(
        "no Java 17.0.17+ or 21.0.8+ found (JAVA_HOME, PATH, /usr/lib/jvm); "
        f"saw {', '.join(seen) or 'none'}; install openjdk-17-jdk-headless "
        "(scripts/setup.sh does it)",
        process="java",
    )


def ensure_runtime(version: str = PULSAR_VERSION, *, quiet: bool = True) -> Path:
    """Resolve the broker's jars with Maven into the cache, once; return the lib directory."""
    target = lib_dir(version)
    marker = target.parent / ".complete"
    if marker.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one assembly at a time across processes
        if marker.exists():
            return target
        mvn = shutil.which("mvn")
        if not mvn:
            raise LocalPulsarError(
                "Maven (mvn) is not installed; scripts/setup.sh installs it", process="mvn"
            )
        shutil.rmtree(target, ignore_errors=True)
        cmd = [
            mvn,
            "-B",
            *(["-q"] if quiet else []),
            "-s",
            str(RUNTIME_DIR / "settings.xml"),
            "-f",
            str(RUNTIME_DIR / "pom.xml"),
            f"-Dpulsar.version={version}",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            "-Dmdep.prependGroupId=true",
            f"-DoutputDirectory={target}",
        ]
        log.info("assembling Pulsar %s from Maven Central into %s", version, target)
        started = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise LocalPulsarError(
                f"Maven could not assemble Pulsar {version}:\n{tail}",
                process="mvn",
                exit_code=done.returncode,
            )
        marker.write_text(json.dumps({"seconds": round(time.monotonic() - started, 1)}))
    return target
