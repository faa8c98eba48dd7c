"""buildah as the tests drive it: vfs storage, chroot isolation, host network.

Builds the Dockerfile (both variants), reads an image's config, runs its command in a container
whose processes can be found on the host, and scans an exported image for a string.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tarfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILDAH = ("buildah", "--storage-driver", "vfs")
RUN_FLAGS = ("--isolation", "chroot", "--network", "host")
# on the containers' processes, so the host can find them in /proc (not a PULSAR_* setting)
TAG_VAR = "LENS_IMAGE_TEST_CONTAINER"


def buildah(*args: str, timeout: float = 600, env: Mapping[str, str] | None = None) -> str:
    """Run one buildah command; its stdout, or AssertionError with its stderr."""
    done = subprocess.run(
        [*BUILDAH, *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    assert done.returncode == 0, f"buildah {' '.join(args[:3])} failed: {done.stderr[-3000:]}"
    return done.stdout


def base_image() -> str:
    """The stand-in for python:3.11-slim (made or reimported by scripts/base-image.sh)."""
    env = {k: v for k, v in os.environ.items() if k != "BASE_IMAGE"}
    code, out, err = _tracked([str(ROOT / "scripts" / "base-image.sh")], timeout=900, env=env)
    assert code == 0, f"scripts/base-image.sh failed: {err[-3000:]}"
    return out.strip().splitlines()[-1]


_running: set[subprocess.Popen[bytes]] = set()
_running_lock = threading.Lock()


def _tracked(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
) -> tuple[int, str, str]:
    """Run `argv` (output to `log`, else captured) where `stop_prebuild` can kill it."""
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(log.open("wb")) if log else subprocess.PIPE
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT if log else subprocess.PIPE, env=env
        )
        with _running_lock:
            _running.add(proc)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        finally:
            with _running_lock:
                _running.discard(proc)
    return proc.returncode, _text(stdout), _text(stderr)


def _text(raw: bytes | None) -> str:
    return (raw or b"").decode(errors="replace")


@dataclass(frozen=True)
class Built:
    name: str
    id: str
    seconds: float
    log: Path


def image_id(name: str) -> str | None:
    done = subprocess.run(
        [*BUILDAH, "inspect", "--type", "image", "--format", "{{.FromImageID}}", name],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return done.stdout.strip() or None if done.returncode == 0 else None


def build(
    name: str, *, base: str, spark: bool, log: Path, env: Mapping[str, str] | None = None
) -> Built:
    """`buildah build` of the Dockerfile with its layer cache; a replaced image and the layers
    only it used are removed, so repeated runs do not fill the disk (vfs copies every layer)."""
    before = image_id(name)
    argv = [
        *BUILDAH, "build", *RUN_FLAGS, "--layers", "--format", "docker", "--pull=never",
        "--build-arg", f"BASE_IMAGE={base}", "--build-arg", f"WITH_SPARK={int(spark)}",
        "--tag", name, str(ROOT),
    ]  # fmt: skip
    started = time.monotonic()
    code, _, _ = _tracked(argv, timeout=2400, env=env, log=log)
    seconds = time.monotonic() - started
    assert code == 0, log.read_text(errors="replace")[-4000:]
    after = image_id(name)
    assert after, f"{name} is not in storage after its build"
    if before and before != after:
        subprocess.run([*BUILDAH, "rmi", before], capture_output=True, timeout=300)
        subprocess.run([*BUILDAH, "rmi", "--prune"], capture_output=True, timeout=600)
    return Built(name, after, seconds, log)


def inspect(name: str) -> dict[str, object]:
    """`buildah inspect` of an image, as JSON."""
    result: dict[str, object] = json.loads(buildah("inspect", "--type", "image", name))
    return result


def docker_config(name: str) -> dict[str, object]:
    """The image's Docker config: Env, Cmd, User, Healthcheck, ExposedPorts, Volumes."""
    docker = inspect(name)["Docker"]
    assert isinstance(docker, dict)
    config: dict[str, object] = docker["config"]
    return config


def image_env(name: str) -> dict[str, str]:
    env = docker_config(name).get("Env") or []
    assert isinstance(env, list)
    return dict(str(pair).split("=", 1) for pair in env)


UNITS = {"B": 1, "kB": 10**3, "MB": 10**6, "GB": 10**9}


def size_bytes(name: str) -> int:
    """The image's uncompressed size as buildah reports it ("920 MB": 3 significant digits)."""
    (entry,) = json.loads(buildah("images", "--json", name))
    number, unit = str(entry["size"]).split()
    return round(float(number) * UNITS[unit])


def container_pids(tag: str) -> list[int]:
    """Host pids of the processes started with TAG_VAR=tag in their environment."""
    needle = f"{TAG_VAR}={tag}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with suppress(OSError):
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                pids.append(int(proc.name))
    return pids


def parent(pid: int) -> int | None:
    with suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
    return None


def uids(pid: int) -> list[int]:
    """Real, effective, saved and filesystem uid of a host process."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return [int(x) for x in line.split()[1:]]
    raise AssertionError(f"no Uid line for pid {pid}")


@dataclass
class Container:
    name: str
    tag: str
    root: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def run(self, argv: Sequence[str], *, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """One command in this container (as the image's user), waited for."""
        return subprocess.run(
            [*BUILDAH, "run", *RUN_FLAGS, self.name, "--", *argv],
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip

    def start(
        self, argv: Sequence[str], *, env: Mapping[str, str], volumes: Mapping[Path, str]
    ) -> None:
        """The image's command, in the background, its output in `log`."""
        flags = [f"--env={k}={v}" for k, v in {**env, TAG_VAR: self.tag}.items()]
        flags += [f"--volume={host}:{inside}" for host, inside in volumes.items()]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [*BUILDAH, "run", *RUN_FLAGS, *flags, self.name, "--", *argv],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def stop(self, *, timeout: float = 60) -> int | None:
        """SIGTERM to the command's processes (the supervisor first), then SIGKILL to any left;
        the command's exit status, or None if it had to be killed."""
        if self.proc is None:
            return None
        pids = container_pids(self.tag)
        for pid in pids:
            if parent(pid) not in pids:  # the command itself; it stops its children
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        try:
            code: int | None = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        for pid in container_pids(self.tag):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        return code

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def container(image: str, log: Path) -> Iterator[Container]:
    """A working container of `image`, its root mounted on the host; always removed after."""
    tag = f"lens-test-{uuid.uuid4().hex[:12]}"
    name = buildah("from", "--pull=never", "--name", tag, image).strip()
    try:
        root = Path(buildah("mount", name).strip())
        box = Container(name=name, tag=tag, root=root, log=log)
        try:
            yield box
        finally:
            box.stop()
    finally:
        subprocess.run([*BUILDAH, "umount", name], capture_output=True, timeout=120)
        subprocess.run([*BUILDAH, "rm", name], capture_output=True, timeout=300)


def push_archive(name: str, path: Path) -> Path:
    """The image as a docker-archive tarball (every layer an uncompressed tar)."""
    buildah("push", "--quiet", name, f"docker-archive:{path}:{name}", timeout=900)
    return path


def archive_hits(path: Path, needles: Sequence[bytes]) -> dict[bytes, list[str]]:
    """For each needle, the members of the archive (and, inside layer tars, the files) that
    hold it; read in chunks that overlap by the longest needle."""
    hits: dict[bytes, list[str]] = {n: [] for n in needles}
    with tarfile.open(path) as outer:
        for member in outer:
            if not member.isfile():
                continue
            stream = outer.extractfile(member)
            assert stream is not None
            if member.name.endswith(".tar"):
                with tarfile.open(fileobj=stream, mode="r|") as layer:
                    for entry in layer:
                        if entry.isfile():
                            inner = layer.extractfile(entry)
                            assert inner is not None
                            where = f"{member.name}:{entry.name}"
                            _scan(inner.read, needles, where, hits)
            else:
                _scan(stream.read, needles, member.name, hits)
    return hits


def _scan(read: object, needles: Sequence[bytes], where: str, hits: dict[bytes, list[str]]) -> None:
    assert callable(read)
    keep = max(len(n) for n in needles)
    tail = b""
    while chunk := read(1 << 20):
        window = tail + chunk
        for needle in needles:
            if needle in window and where not in hits[needle]:
                hits[needle].append(where)
        tail = window[-keep:]


IMAGE = "localhost/pulsar-lens:test"
SPARK_IMAGE = "localhost/pulsar-lens:test-spark"
BUILD_MARKER = f"build-env-marker-{uuid.uuid4().hex}"


@dataclass
class Prebuild:
    """The stand-in base and both variants, built one after the other in the background from
    the start of the test run (the image tests run last), so that a cold build (about 13
    minutes here, mostly downloads and vfs copies) overlaps the rest of the run."""

    base: Future[str]
    light: Future[Built]
    spark: Future[Built]
    executor: ThreadPoolExecutor


_prebuild: Prebuild | None = None


def start_prebuild(log_dir: Path) -> Prebuild:
    """Start (once) the builds; the build's environment holds a token, as a developer's shell
    might, which the tests then look for in the image."""
    global _prebuild
    if _prebuild is None:
        log_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PULSAR_ADMIN_TOKEN": BUILD_MARKER}
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="image-build")
        base = pool.submit(base_image)

        def variant(name: str, spark: bool) -> Built:
            log = log_dir / f"image-build-{'spark' if spark else 'light'}.log"
            return build(name, base=base.result(), spark=spark, log=log, env=env)

        light = pool.submit(variant, IMAGE, False)
        spark = pool.submit(variant, SPARK_IMAGE, True)
        _prebuild = Prebuild(base, light, spark, pool)
    return _prebuild


def stop_prebuild() -> None:
    """Cancel what has not started and kill what runs (the run is over)."""
    if _prebuild is None:
        return
    _prebuild.executor.shutdown(wait=False, cancel_futures=True)
    with _running_lock:
        for proc in _running:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
