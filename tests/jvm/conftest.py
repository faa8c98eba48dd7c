"""The broker's own classes, driven directly: `BrokerOracle.java` compiled against the jars of
the local Pulsar 4.0.7 runtime and run once per test session. Missing Java or jars fail the
tier loudly (scripts/setup.sh installs both); they never skip it."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from lab.runtime import ensure_runtime, find_java

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


class Oracle:
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

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


def _compiled(java: str, classpath: str) -> Path:
    digest = hashlib.sha256(SOURCE.read_bytes() + classpath.encode()).hexdigest()[:16]
    out = Path.home() / ".cache" / "pulsar-lens" / "oracle" / digest
    if not (out / "BrokerOracle.class").exists():
        out.mkdir(parents=True, exist_ok=True)
        javac = str(Path(java).with_name("javac"))
        done = subprocess.run(
            [javac, "-d", str(out), "-cp", classpath, str(SOURCE)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"javac failed:\n{done.stdout}{done.stderr}"
    return out


@pytest.fixture(scope="session")
def oracle() -> Iterator[Oracle]:
    java = find_java()
    jars = sorted(ensure_runtime().glob("*.jar"))
    assert jars, "no Pulsar jars: run scripts/setup.sh"
    classpath = ":".join(str(j) for j in jars)
    classes = _compiled(java, classpath)
    process = subprocess.Popen(
        [java, "-Xmx256m", "-cp", f"{classes}:{classpath}", "BrokerOracle"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline().decode().strip()
        assert first == "READY", f"the broker oracle did not start: {first!r}"
        yield Oracle(process)
    finally:
        process.kill()
        process.wait(timeout=10)
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()
