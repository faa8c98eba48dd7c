"""A settings file built to exhaust the loader — nested past any real settings, or far larger
than one — is refused with one clear message naming it, never a RecursionError."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pulsar_lens.core.configfile import MAX_DEPTH, MAX_FILE_BYTES, load
from pulsar_lens.core.errors import SettingsError
from tests.lens_cli import run_lens


def arrays(depth: int) -> str:
    return f"retention = {'[' * depth}1{']' * depth}\n"


def inline_tables(depth: int) -> str:
    return f"retention = {'{ a = ' * depth}1{' }' * depth}\n"


def mixed(depth: int) -> str:
    opening = "".join("[" if i % 2 else "{ a = " for i in range(depth))
    closing = "".join("]" if i % 2 else " }" for i in reversed(range(depth)))
    return f"retention = {opening}1{closing}\n"


def in_a_cluster(depth: int) -> str:
    return f'[[clusters]]\nadmin_url = "http://b:8080"\ntrusted_origins = {arrays(depth)[12:]}'


def dotted_keys(depth: int) -> str:
    return "[" + ".".join(["clusters"] + ["k"] * depth) + "]\nx = 1\n"


def quoted_keys(depth: int) -> str:
    return ".".join(['"k"'] * depth) + " = 1\n"


SHAPES: dict[str, Callable[[int], str]] = {
    "arrays": arrays,
    "inline tables": inline_tables,
    "arrays and tables": mixed,
    "arrays in a cluster": in_a_cluster,
    "dotted keys": dotted_keys,
    "quoted dotted keys": quoted_keys,
}
# past Python's recursion limit, and within it but deeper than any real key
DEPTHS = (100_000, 2_000, 300, MAX_DEPTH + 1)
CASES = [(shape, depth) for shape in SHAPES for depth in DEPTHS]


@pytest.mark.parametrize(("shape", "depth"), CASES, ids=[f"{s}-{d}" for s, d in CASES])
def test_a_deeply_nested_file_is_refused_by_name(tmp_path: Path, shape: str, depth: int) -> None:
    path = tmp_path / "lens.toml"
    path.write_text(SHAPES[shape](depth))
    with pytest.raises(SettingsError) as refused:
        load({}, config=path)
    message = str(refused.value)
    assert str(path) in message
    assert "too deep" in message or "not valid TOML" in message
    assert len(message) < 300  # one line that says why, not the whole value back


def test_the_deepest_real_settings_still_load(tmp_path: Path) -> None:
    path = tmp_path / "lens.toml"
    path.write_text(
        '[[clusters]]\nname = "a"\nadmin_url = "http://b:8080"\n[clusters.tls]\nverify = false\n'
    )
    loaded = load({}, config=path)
    assert loaded.config.clusters[0].tls.verify is False


@pytest.mark.parametrize("filler", ["# a comment\n", 'x = "' + "y" * 1000 + '"\n'])
def test_a_file_larger_than_any_settings_is_refused_unparsed(tmp_path: Path, filler: str) -> None:
    path = tmp_path / "lens.toml"
    path.write_text(filler * (MAX_FILE_BYTES // len(filler) + 1))
    with pytest.raises(SettingsError, match=f"{path}: larger than 1024 KiB"):
        load({}, config=path)


def test_collect_refuses_a_nested_file_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "lens.toml"
    path.write_text(arrays(100_000))
    done = run_lens("collect", "--once", "--config", str(path), "--store", str(tmp_path / "s"))
    assert done.returncode == 2, done.stderr
    too_deep = f"values nested more than {MAX_DEPTH} deep, too deep for a settings file"
    assert done.stderr.strip() == f"pulsar-lens: {path}: {too_deep}"
