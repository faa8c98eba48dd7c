"""The broker's own classes, driven directly: each oracle (`BrokerOracle.java`,
`BackoffOracle.java`, `HashOracle.java`) compiled against the jars of each release in
`ORACLE_RELEASES` and run once per release per test session, so every test that asks an
oracle runs on each release (its id says which: `[pulsar-3.0.7]`). Missing Java or jars
fail the tier loudly (scripts/setup.sh installs both); they never skip it."""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from pulsar_lens.lab.runtime import PULSAR_VERSION, TESTED_RELEASES, ensure_runtime, find_java

ORACLE_RELEASES = TESTED_RELEASES
"""The releases whose own classes the oracles drive: 4.0 LTS, 3.0 LTS and 4.2, as the lab runs
them."""

SOURCE = Path(__file__).with_name("BrokerOracle.java")
BATCH = 100  # names per exchange: well under a pipe buffer each way


@dataclass(frozen=True)
class Answer:
    """How the broker read one name: its full name, partition, namespace, local name and
    bundle, or the exception it raised."""

    topic: str | None = None
    partition_index: int | None = None
    namespace: str | None = None
    local: str | None = None
    bundle: str | None = None
    error: str | None = None


@pytest.fixture(scope="session", params=ORACLE_RELEASES, ids=lambda v: f"pulsar-{v}")
def pulsar_version(request: pytest.FixtureRequest) -> str:
    """The release whose classes this test's oracle runs (every oracle test runs on each)."""
    version: str = request.param
    return version


class Oracle:
    def __init__(self, process: subprocess.Popen[bytes], version: str) -> None:
        self.process = process
        self.version = version

    def ask(self, names: Sequence[str], *, bundles: int = 4) -> list[Answer]:
        """One answer per name; asked in batches small enough that neither pipe fills."""
        answers: list[Answer] = []
        for start in range(0, len(names), BATCH):
            answers += self._ask(names[start : start + BATCH], bundles)
        return answers

    def _ask(self, names: Sequence[str], bundles: int) -> list[Answer]:
        assert self.process.stdin is not None and self.process.stdout is not None
        lines = b"".join(
            f"{bundles}\t{name.encode('utf-8', 'surrogatepass').hex()}\n".encode() for name in names
        )
        self.process.stdin.write(lines)
        self.process.stdin.flush()
        return [_answer(self.process.stdout.readline().decode()) for _ in names]


def _answer(line: str) -> Answer:
    fields = line.rstrip("\n").split("\t")
    if fields[0] == "ERR":
        return Answer(error=bytes.fromhex(fields[1]).decode())
    if fields[0] != "OK" or len(fields) != 6:
        raise AssertionError(f"the oracle answered {line!r}")
    text = [bytes.fromhex(f).decode() for f in (fields[1], fields[3], fields[4])]
    return Answer(text[0], int(fields[2]), text[1], text[2], fields[5])


@pytest.fixture(scope="session")
def oracle(pulsar_version: str) -> Iterator[Oracle]:
    with running_oracle(SOURCE, pulsar_jars(pulsar_version), "broker") as process:
        yield Oracle(process, pulsar_version)


BACKOFF_SOURCE = Path(__file__).with_name("BackoffOracle.java")


class BackoffOracle:
    """The client's own `org.apache.pulsar.common.util.Backoff`, driven over a pipe."""

    def __init__(self, process: subprocess.Popen[bytes], version: str) -> None:
        self.process = process
        self.version = version

    def _say(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{line}\n".encode())
        self.process.stdin.flush()

    def _line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().decode().rstrip("\n")

    def defaults(self) -> tuple[int, int, int]:
        """The client's defaults in ms: initial backoff, max backoff, producer send timeout."""
        self._say("DEFAULTS")
        fields = self._line().split(" ")
        assert fields[0] == "DEFAULTS" and len(fields) == 4, f"the oracle answered {fields}"
        return int(fields[1]), int(fields[2]), int(fields[3])

    def run(
        self,
        *,
        initial: int,
        max_ms: int,
        stop: int,
        seed: int,
        runs: int,
        steps: int,
        attempt: int = 0,
        reset_at: int = 0,
        clock: bool = True,
    ) -> list[tuple[int, ...]]:
        """`runs` fresh backoffs, `steps` `next()` calls each, after seeding the class's shared
        Random; `clock` drives a manual clock (each delay plus `attempt` ms), else the builder."""
        mode = "clock" if clock else "builder"
        self._say(
            f"RUN {mode} {initial} {max_ms} {stop} {seed} {runs} {steps} {attempt} {reset_at}"
        )
        sequences = [tuple(int(v) for v in self._line().split(" ")) for _ in range(runs)]
        end = self._line()
        assert end == "END", f"the oracle answered {end!r} after {runs} runs"
        return sequences


@contextlib.contextmanager
def running_oracle(
    source: Path, classpath: Sequence[Path], what: str
) -> Iterator[subprocess.Popen[bytes]]:
    """The oracle class of `source`, compiled against `classpath` (cached), running with its
    pipes open until the block ends; it must say READY first. Its JVM hashes names in UTF-8
    (`String.getBytes()`), as the lab's brokers do."""
    java = find_java()
    path = ":".join(str(p) for p in classpath)
    classes = _compiled_source(java, path, source)
    process = subprocess.Popen(
        [java, "-Xmx256m", "-Dfile.encoding=UTF-8", "-cp", f"{classes}:{path}", source.stem],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline().decode().strip()
        assert first == "READY", f"the {what} oracle did not start: {first!r}"
        yield process
    finally:
        process.kill()
        process.wait(timeout=10)
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()


def pulsar_jars(version: str = PULSAR_VERSION) -> list[Path]:
    jars = sorted(ensure_runtime(version).glob("*.jar"))
    assert jars, f"no Pulsar {version} jars: run scripts/setup.sh"
    return jars


def _compiled_source(java: str, classpath: str, source: Path) -> Path:
    digest = hashlib.sha256(source.read_bytes() + classpath.encode()).hexdigest()[:16]
    out = Path.home() / ".cache" / "pulsar-lens" / "oracle" / f"{source.stem}-{digest}"
    if not (out / f"{source.stem}.class").exists():
        out.mkdir(parents=True, exist_ok=True)
        javac = str(Path(java).with_name("javac"))
        done = subprocess.run(
            [javac, "-nowarn", "-d", str(out), "-cp", classpath, str(source)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"javac failed:\n{done.stdout}{done.stderr}"
    return out


@pytest.fixture(scope="session")
def backoff_oracle(pulsar_version: str) -> Iterator[BackoffOracle]:
    with running_oracle(BACKOFF_SOURCE, pulsar_jars(pulsar_version), "backoff") as process:
        yield BackoffOracle(process, pulsar_version)


HASH_SOURCE = Path(__file__).with_name("HashOracle.java")


class HashOracle:
    """The broker's `Murmur3_32Hash` and the Spark UDF of `plugins/spark/jvm`, over a pipe."""

    def __init__(self, process: subprocess.Popen[bytes], version: str) -> None:
        self.process = process
        self.version = version

    def ask(self, keys: Sequence[bytes | str]) -> list[tuple[bytes, int, int]]:
        """(bytes hashed, the broker's hash, the UDF's) per key: bytes as they are, a str as a
        Java string the way the Java client encodes it."""
        answers: list[tuple[bytes, int, int]] = []
        for start in range(0, len(keys), BATCH):
            answers += self._ask(keys[start : start + BATCH])
        return answers

    def _ask(self, keys: Sequence[bytes | str]) -> list[tuple[bytes, int, int]]:
        assert self.process.stdin is not None and self.process.stdout is not None
        lines = b"".join(
            f"B {k.hex()}\n".encode()
            if isinstance(k, bytes)
            else f"S {k.encode('utf-16-be', 'surrogatepass').hex()}\n".encode()
            for k in keys
        )
        self.process.stdin.write(lines)
        self.process.stdin.flush()
        answers = []
        for _ in keys:
            hashed, broker, udf = self.process.stdout.readline().decode().split(" ")
            answers.append((bytes.fromhex(hashed), int(broker), int(udf)))
        return answers


@pytest.fixture(scope="session")
def hash_oracle(pulsar_version: str) -> Iterator[HashOracle]:
    from pulsar_lens.plugins.spark import jvm

    spark_api = sorted(jvm.spark_jars().glob("spark-sql-api_*.jar"))  # the UDF's interface
    assert spark_api, f"no spark-sql-api jar in {jvm.spark_jars()}"
    classpath = [jvm.compile_jar(), *spark_api, *pulsar_jars(pulsar_version)]
    with running_oracle(HASH_SOURCE, classpath, "hash") as process:
        yield HashOracle(process, pulsar_version)


SELECTOR_SOURCE = Path(__file__).with_name("SelectorOracle.java")


class SelectorOracle:
    """The broker's own Key_Shared selectors (`SelectorOracle.java`), over a pipe; consumers
    are named by the ids a test gives them."""

    def __init__(self, process: subprocess.Popen[bytes], version: str) -> None:
        self.process = process
        self.version = version

    def _say(self, line: str) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{line}\n".encode())
        self.process.stdin.flush()
        return self.process.stdout.readline().decode().rstrip("\n")

    def new(self, kind: str, points: int = 100) -> None:
        assert self._say(f"NEW {kind} {points}") == "OK"

    def add(self, ident: int, name: str, sticky: Sequence[tuple[int, int]] = ()) -> str | None:
        """None when the selector took the consumer, else its refusal's message."""
        ranges = ",".join(f"{s}-{e}" for s, e in sticky)
        answer = self._say(f"ADD {ident} {name.encode().hex()} {ranges}".rstrip())
        if answer == "OK":
            return None
        assert answer.startswith("ERR "), answer
        return bytes.fromhex(answer[4:]).decode()

    def remove(self, ident: int) -> None:
        assert self._say(f"REMOVE {ident}") == "OK"

    def ranges(self) -> dict[int, list[tuple[int, int]]]:
        """Each consumer's ranges as the selector lists them."""
        listed: dict[int, list[tuple[int, int]]] = {}
        answer = self._say("RANGES")
        for entry in answer.split(";") if answer else ():
            ident, _, text = entry.partition(":")
            pairs = (r.split("-") for r in text.split(",") if r)
            listed[int(ident)] = [(int(s), int(e)) for s, e in pairs]
        return listed

    def select(self, keys: Sequence[bytes]) -> list[int | None]:
        answers: list[int | None] = []
        for start in range(0, len(keys), BATCH):
            line = self._say("SELECT " + " ".join(k.hex() for k in keys[start : start + BATCH]))
            answers += [None if a == "-" else int(a) for a in line.split(" ")]
        return answers


@pytest.fixture(scope="session")
def selector_oracle(pulsar_version: str) -> Iterator[SelectorOracle]:
    with running_oracle(SELECTOR_SOURCE, pulsar_jars(pulsar_version), "selector") as process:
        yield SelectorOracle(process, pulsar_version)
