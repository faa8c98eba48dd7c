"""Path segments from names: any text either becomes one segment that decodes to itself, or
is refused; never a `/`, `?`, `#` or dot segment in a path."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pulsar_lens.core.names import NameRefused, broker_id_problem, segment
from tests.props.strategies import props


@props(300)
@given(st.text(st.characters(codec=None), max_size=40))
@example(".")
@example("..")
@example("a\udcff")
@example("")
@example("a/../b")
def test_segment_is_one_segment_decoding_to_the_name_or_refused(name: str) -> None:
    try:
        encoded = segment(name)
    except NameRefused:
        assert name in ("", ".", "..") or any("\ud800" <= c <= "\udfff" for c in name)
        return
    assert not set("/?#") & set(encoded) and encoded not in (".", "..")
    assert unquote(encoded, errors="strict") == name


@pytest.mark.parametrize(
    ("broker", "ok"),
    [
        ("b1:8080", True),
        ("broker-0.pulsar.svc.cluster.local:8080", True),
        ("[::1]:8080", True),
        ("b1", False),
        ("b1:0", False),
        ("b1:65536", False),
        ("/x?:8080", False),
        ("a b:8080", False),
        ("..:8080", False),
        ("[::1/x]:8080", False),
        ("b1:8080/x", False),
        ("caf\u00e9:8080", False),
        ("b1:\u0668\u0660", False),  # Arabic-Indic digits are no port
    ],
)
def test_broker_id_problem(broker: str, ok: bool) -> None:
    assert (broker_id_problem(broker) is None) == ok
