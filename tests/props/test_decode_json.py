"""`decode_json` (msgspec, duplicate keys found by counting colons) reads every body as the
standard library's `decode_json_tolerant` does: the same value, the same types (a
`Duplicated` object naming the same keys), or the same error.

The bodies are written by hand so they can hold what `json.dumps` never writes: keys given
twice (often with colons in them), whitespace around colons, escaped colons and other
escapes, a byte-order mark, bytes that are not UTF-8, numbers past any float or int64.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pulsar_lens.collectors import answers
from pulsar_lens.collectors.answers import Duplicated, decode_json, decode_json_tolerant


class Number(str):
    """A number written as it stands (past float range, -0, an exponent, many digits)."""


KEYS = st.sampled_from(["a", "b", ":", "a:", "x:y", "é", "\u2028", "k\\", '"q"', "\ud800"])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["1e400", "-0", "1E2", "0.1000000000000000055511151231257827"]).map(Number)
    | st.text(max_size=8)
    | KEYS
)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    value = draw(
        st.recursive(
            SCALARS,
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.lists(st.tuples(KEYS, inner), max_size=4).map(tuple)
            ),
            max_leaves=12,
        )
    )
    colon = draw(st.sampled_from([":", " : ", ": ", "\n:", "\t:\r"]))
    ascii_only = draw(st.booleans())
    escape_colons = draw(st.booleans())

    def text(s: str) -> str:
        written = json.dumps(s, ensure_ascii=ascii_only)
        return written.replace(":", "\\u003a") if escape_colons else written

    def write(v: Any) -> str:
        if isinstance(v, tuple):  # an object: key-value pairs, keys possibly repeated
            return "{" + ",".join(f"{text(k)}{colon}{write(item)}" for k, item in v) + "}"
        if isinstance(v, list):
            return "[" + ",".join(write(item) for item in v) + "]"
        if isinstance(v, Number):
            return str(v)
        return text(v) if isinstance(v, str) else json.dumps(v)

    body = write(value).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        body = b"\xef\xbb\xbf" + body
    damage = draw(st.sampled_from([b"", b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\\", b"NaN"]))
    at = draw(st.integers(min_value=0, max_value=len(body)))
    return body[:at] + damage + body[at:]


def outcome(decode: Any, body: bytes) -> Any:
    try:
        return ("value", described(decode(body)))
    except (ValueError, RecursionError) as exc:
        return ("error", type(exc).__name__, str(exc))


def described(value: Any) -> Any:
    """The value with its types: Duplicated and its keys, floats by repr (-0.0, 1e400)."""
    if isinstance(value, dict):
        keys = getattr(value, "duplicates", None)
        items = [(k, described(v)) for k, v in value.items()]
        return (type(value).__name__, keys, items)
    if isinstance(value, list):
        return ["list", *(described(v) for v in value)]
    return (type(value).__name__, repr(value))


@given(bodies())
@example(b'{"a":1,"a":2}')
@example(b'{"a" :1,"a":2}')
@example(b'{"a:":1,"a\\u003a":2}')
@example(b'{"a":"\\u003a","a":1}')
@example(b'{"a":{"b":1,"b":{"c":2}}}')
@example(b'\xef\xbb\xbf{"a":1}')
@example(b'{"a":123456789012345678901234567890}')
def test_decode_json_reads_as_the_tolerant_reader(body: bytes) -> None:
    assert outcome(decode_json, body) == outcome(decode_json_tolerant, body)


def test_a_strict_body_without_repeated_keys_is_read_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only what the strict reader cannot vouch for is read a second time."""
    read_again: list[bytes] = []

    def tolerant(body: bytes) -> Any:
        read_again.append(body)
        return decode_json_tolerant(body)

    monkeypatch.setattr(answers, "decode_json_tolerant", tolerant)
    clean = b'\xef\xbb\xbf{"t": {"a:b": [1, 2.5, "x:y", {"c" : null}]}, "d": "\\u003a"}'
    assert answers.decode_json(clean) == {"t": {"a:b": [1, 2.5, "x:y", {"c": None}]}, "d": ":"}
    assert read_again == []
    for body in (b'{"a":1,"a":2}', b'{"a":"\\ud800"}', b'{"\xff":1}', b"[NaN]", b"[1e400]"):
        answers.decode_json(body)
    assert len(read_again) == 5
    assert isinstance(answers.decode_json(b'{"a":1,"a":2}'), Duplicated)
