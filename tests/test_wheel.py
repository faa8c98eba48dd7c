"""The distribution a user installs: the wheel built from this tree holds one top-level name,
`pulsar_lens` (and its dist-info), every package of the tree and its data files, passes
`twine check`, and, installed (not editable) into a fresh virtualenv and run from outside the
repository, answers `--version`, lists every plugin, analyses a small store and serves the
dashboard to a 200 health answer.

The fresh virtualenv gets the dependencies from this run's environment through a path entry
(no `.pth` of that environment is processed, so its editable mapping of this tree stays out):
`pulsar_lens` can only come from the wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pulsar_lens.core.store import Store
from pulsar_lens.lab.localpulsar import free_port
from tests.core.snapshots import make_snapshot
from tests.waits import wait_until_ok

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("core", "collectors", "lab", "plugins", "exporter", "dashboard", "cli")

pytestmark = pytest.mark.timeout(900)


def _run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600):
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{argv}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a copy of the tree's files (tracked and new, not ignored), so that nothing
    a former build left in `build/` can reach the wheel, and the tree stays as it was."""
    out, src = tmp_path_factory.mktemp("dist"), tmp_path_factory.mktemp("src")
    listed = _run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT
    ).stdout
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    build = [sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out)]
    _run([*build, str(src)], cwd=out)
    (built,) = out.glob("pulsar_lens-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", "--without-pip", str(home)], cwd=home)
    python = home / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    _run([*pip, "install", "-q", "--no-deps", "--no-index", str(wheel)], cwd=home)
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            cwd=home,
        ).stdout.strip()
    )
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return home


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A working folder outside the repository and an environment naming nothing of it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PULSAR_", "PYTHON"))}
    yield tmp_path, env


def test_every_package_folder_is_listed_in_pyproject() -> None:
    """pyproject lists the packages by name (the mapping needs it): a new folder with an
    `__init__.py` that is not listed would be left out of the wheel, its imports failing only
    once installed."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {
        ".".join(("pulsar_lens", *init.parent.relative_to(ROOT).parts))
        for part in PARTS
        for init in (ROOT / part).rglob("__init__.py")
    }
    assert folders - set(setuptools["packages"]) == set(), "add these to pyproject's packages"


def test_wheel_holds_one_top_level_name_and_every_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {"pulsar_lens", wheel.name.split("-py3")[0] + ".dist-info"}, tops
    sources = {
        f"pulsar_lens/{p.relative_to(ROOT).as_posix()}"
        for part in PARTS
        for p in (ROOT / part).rglob("*.py")
        if "__pycache__" not in p.parts
    }
    missing = sources - set(names)
    assert not missing, f"packages or modules left out of the wheel: {sorted(missing)[:10]}"
    assert "pulsar_lens/api.py" in names
    runtime = [n for n in names if n.startswith("pulsar_lens/lab/pulsar_runtime/")]
    assert runtime, "the local Pulsar's configuration files are not in the wheel"
    with zipfile.ZipFile(wheel) as zf:
        entry = zf.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "pulsar-lens = pulsar_lens.cli.main:run" in entry


def test_wheel_metadata_passes_twine_check(wheel: Path) -> None:
    done = _run([sys.executable, "-m", "twine", "check", "--strict", str(wheel)], cwd=wheel.parent)
    assert "PASSED" in done.stdout


def test_wheel_dependencies_are_the_projects(wheel: Path) -> None:
    """pyspark is a plain dependency: the history analyses are part of the product."""
    with zipfile.ZipFile(wheel) as zf:
        meta = zf.read(next(n for n in zf.namelist() if n.endswith("METADATA"))).decode()
    required = [line for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for dependency in project["dependencies"]:
        name = dependency.split("[")[0].split(">")[0].split("<")[0].strip()
        assert any(name in line and "extra ==" not in line for line in required), dependency


def test_installed_wheel_runs_from_outside_the_repository(
    venv: Path, outside: tuple[Path, dict[str, str]]
) -> None:
    cwd, env = outside
    lens = str(venv / "bin" / "pulsar-lens")
    python = str(venv / "bin" / "python")

    where = _run(
        [python, "-c", "import pulsar_lens; print(pulsar_lens.__file__)"], cwd=cwd, env=env
    )
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout
    for name in PARTS:
        bare = subprocess.run([python, "-c", f"import {name}"], cwd=cwd, env=env, check=False)
        assert bare.returncode != 0, f"the install exposes a top-level `{name}`"

    version = _run([lens, "--version"], cwd=cwd, env=env)
    assert version.stdout.startswith("pulsar-lens ")

    listed = json.loads(_run([lens, "plugins", "--json"], cwd=cwd, env=env).stdout)
    slugs = {p["name"] for p in listed["loaded"]}
    assert {"subscription-status", "key-shared-map", "failover-history"} <= slugs, slugs
    assert not listed["failed"], listed["failed"]

    store = cwd / "store"
    Store(store).write(make_snapshot())
    analysed = _run(
        [lens, "analyze", "subscription-status", "--store", str(store), "--json"],
        cwd=cwd,
        env=env,
    )
    assert json.loads(analysed.stdout)


def test_installed_wheel_serves_the_dashboard(
    venv: Path, outside: tuple[Path, dict[str, str]]
) -> None:
    cwd, env = outside
    store = cwd / "store"
    Store(store).write(make_snapshot())
    port = free_port()
    argv = [str(venv / "bin" / "pulsar-lens"), "serve", "--port", str(port), "--store", str(store)]
    log = cwd / "serve.log"
    with (
        log.open("w") as out,
        subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        ) as proc,
    ):
        try:
            wait_until_ok(
                f"http://127.0.0.1:{port}/_stcore/health",
                timeout=240,
                exit_code=proc.poll,
                output=log.read_text,
                what="the installed `pulsar-lens serve`",
            )
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
