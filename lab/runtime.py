"""What a local Pulsar broker runs on: a supported JDK, and the broker's jars resolved from
Maven Central with Maven into `~/.cache/pulsar-lens/pulsar-<version>/lib` (Maven's own
downloads stay in `~/.m2`). Standard library only, so the set-up script can ask it before
any virtualenv exists.

`RELEASES` is the one table of the releases the lab runs and of everything that differs
between them (the JDKs, the logging binding, broker settings); the rest of the lab asks it.
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pulsar_lens.core.errors import LocalPulsarError
from pulsar_lens.core.settings import process_environ

log = logging.getLogger(__name__)

JavaRange = tuple[tuple[int, ...], tuple[int, ...]]

JAVA_17: JavaRange = ((17, 0, 17), (18,))
"""Java 17 from the release that fixes JDK-8351933 (which destabilises Pulsar)."""
JAVA_21: JavaRange = ((21, 0, 8), (22,))


@dataclass(frozen=True)
class Release:
    """One Pulsar release the lab assembles and starts, and what differs about it."""

    version: str
    line: str  # the broker line the models name: "4.0", "3.0"
    java: tuple[JavaRange, ...]
    slf4j_binding: str = "log4j-slf4j2-impl"  # Pulsar is on SLF4J 2 since 3.1
    settings: Mapping[str, str] = field(default_factory=dict)
    """Broker settings this release needs on top of the lab's own (standalone and cluster)."""
    note: str = ""
    admin_tool: str | None = None
    """The release of `pulsar-admin` (the `pulsar-client-tools` artifact) the lab runs against
    this broker (`lab.admintool`); None when Maven Central serves none close to it."""


RELEASES: dict[str, Release] = {
    release.version: release
    for release in (
        Release(
            "4.0.7",
            "4.0",
            (JAVA_17, JAVA_21),
            note="the newest 4.0.x whose every artifact Maven Central serves (4.0.8 lacks some)",
            # Maven Central has no pulsar-client-tools 4.0.7: the admin tool of 4.0.6 speaks
            # the same admin API, as a support engineer's tool a release apart does
            admin_tool="4.0.6",
        ),
        Release(
            "3.0.7",
            "3.0",
            (JAVA_17,),
            slf4j_binding="log4j-slf4j-impl",  # 3.0 is on SLF4J 1.7
            settings={
                # a 3.0 broker with a load balancer on (the cluster's) refuses to start where
                # it cannot read the NIC's speed (loopback, containers); 4.0.7 has no such
                # check. 100 Gbps keeps the lab's traffic from counting as bandwidth load.
                "loadBalancerOverrideBrokerNicSpeedGbps": "100",
            },
            note="the newest 3.0.x on Maven Central (3.0.8 and later are not published there)",
        ),
        Release(
            "4.2.4",
            "4.2",
            (JAVA_17, JAVA_21),
            note="the newest release after 4.0 on Maven Central (no 4.1.x is published there)",
        ),
    )
}

PULSAR_VERSION = "4.0.7"
"""The release the lab starts unless told otherwise."""

TESTED_RELEASES = (PULSAR_VERSION, "3.0.7", "4.2.4")
"""The releases the tests prove the models against (4.0 LTS, 3.0 LTS and the newest line):
scripts/setup.sh fetches their jars and installs a JDK that runs all three; the live tests
start a broker of each (`tests/brokers.py` `LIVE_LINES`) and `tests/jvm` drives each one's
classes."""

SUPPORTED_JAVA = RELEASES[PULSAR_VERSION].java
"""Java lines Pulsar 4.0 runs on, each from the release that fixes JDK-8351933; 23+ needs
flags that 17 rejects and 4.0 is not tested there. 3.0 runs on 17 only (its documented
broker JDK)."""


def release(name: str = PULSAR_VERSION) -> Release:
    """The release of a version ("3.0.7") or of a broker line ("3.0"); raise for any other."""
    if name in RELEASES:
        return RELEASES[name]
    for candidate in RELEASES.values():
        if candidate.line == name:
            return candidate
    known = ", ".join(f"{r.version} ({r.line})" for r in RELEASES.values())
    raise LocalPulsarError(f"the lab runs no Pulsar {name!r}; it runs {known}", process="Pulsar")


def version_names() -> list[str]:
    """Every name `release()` takes: each version and each line."""
    return [n for r in RELEASES.values() for n in (r.version, r.line)]


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


def java_supported(version: tuple[int, ...], pulsar: str = PULSAR_VERSION) -> bool:
    return any(low <= version < high for low, high in release(pulsar).java)


def find_java(pulsar: str = PULSAR_VERSION) -> str:
    """A `java` that Pulsar release `pulsar` runs well on: $JAVA_HOME first, then PATH,
    then /usr/lib/jvm."""
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
            if java_supported(version, pulsar):
                return java
            seen.append(f"{java} ({'.'.join(map(str, version))})")
    wanted = " or ".join(f"{'.'.join(map(str, low))}+" for low, _ in release(pulsar).java)
    raise LocalPulsarError(
        f"no Java {wanted} for Pulsar {release(pulsar).version} found "
        "(JAVA_HOME, PATH, /usr/lib/jvm); "
        f"saw {', '.join(seen) or 'none'}; install openjdk-17-jdk-headless "
        "(scripts/setup.sh does it)",
        process="java",
    )


def assembled(version: str = PULSAR_VERSION) -> bool:
    """Whether the jars of `version` (a version or a line) are in the cache, complete."""
    return _complete(lib_dir(release(version).version)).exists()


def require_assembled(version: str = PULSAR_VERSION) -> Release:
    """The release of `version` (a version or a line) when its jars are in the cache; else
    raise naming the command that assembles them (a start never waits on Maven unasked)."""
    chosen = release(version)
    if not assembled(chosen.version):
        raise LocalPulsarError(
            f"Pulsar {chosen.version} is not assembled in {cache_root()}: run "
            f"`pulsar-lens pulsar assemble --pulsar {chosen.version}` first (it fetches the "
            "jars from Maven Central, once)",
            process="Pulsar",
        )
    return chosen


def _complete(lib: Path) -> Path:
    """The marker that says the jars of `lib` are all there."""
    return lib.parent / ".complete"


def ensure_runtime(version: str = PULSAR_VERSION, *, quiet: bool = True) -> Path:
    """Resolve the broker's jars with Maven into the cache, once; return the lib directory.
    `version` is a version or a line of `RELEASES`."""
    chosen = release(version)
    version = chosen.version
    target = lib_dir(version)

    def assemble() -> str:
        started = time.monotonic()
        maven_copy(
            RUNTIME_DIR / "pom.xml",
            target,
            version=version,
            binding=chosen.slf4j_binding,
            what=f"Pulsar {version}",
            quiet=quiet,
        )
        return json.dumps({"seconds": round(time.monotonic() - started, 1)})

    once(_complete(target), target.parent / ".lock", assemble)
    return target


def once(marker: Path, lock_path: Path, build: Callable[[], str]) -> None:
    """Run `build` unless `marker` exists, one process at a time (`lock_path` is the lock);
    what it returns is written to `marker`, which says the work is complete."""
    if marker.exists():
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one assembly at a time across processes
        if not marker.exists():
            marker.write_text(build())


def maven_copy(
    pom: Path, target: Path, *, version: str, binding: str, what: str, quiet: bool = True
) -> None:
    """Resolve the runtime dependencies of `pom` (at Pulsar `version`, with that SLF4J
    `binding`) from Maven Central into `target`, replacing what it held."""
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
        str(pom),
        f"-Dpulsar.version={version}",
        f"-Dlog4j.slf4j.binding={binding}",
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        "-Dmdep.prependGroupId=true",
        f"-DoutputDirectory={target}",
    ]
    log.info("assembling %s from Maven Central into %s", what, target)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise LocalPulsarError(
            f"Maven could not assemble {what}:\n{tail}",
            process="mvn",
            exit_code=done.returncode,
        )
