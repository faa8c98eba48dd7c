"""The Spark UDF's murmur3 (`plugins/spark/jvm/StickyKeyHash.java`) against the broker's own
`Murmur3_32Hash`, and both against `core.hashing`, on thousands of random keys: every length
from 0 to 300 bytes, arbitrary bytes, text in many scripts, and Java strings holding lone
surrogates as the Java client and Spark encode them."""

from __future__ import annotations

import random

import pyarrow as pa

from pulsar_lens.core.hashing import murmur3_31, murmur3_31_array
from tests.jvm.conftest import HashOracle

LONGEST = 300
SCRIPTS = (
    (0x20, 0x7E),  # ASCII
    (0xA0, 0x24F),  # Latin-1 and Latin Extended: two bytes
    (0x370, 0x3FF),  # Greek
    (0x400, 0x4FF),  # Cyrillic
    (0x590, 0x6FF),  # Hebrew, Arabic
    (0x900, 0x97F),  # Devanagari: three bytes
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x4E00, 0x9FFF),  # CJK
    (0xAC00, 0xD7A3),  # Hangul
    (0xE000, 0xF8FF),  # private use
    (0xFFF0, 0xFFFF),  # specials, noncharacters
    (0x1F300, 0x1FAFF),  # emoji: four bytes
    (0x10000, 0x10FFFF),  # any supplementary plane
    (0x0, 0x1F),  # control characters, NUL included
)


def text_keys(rng: random.Random, count: int) -> list[str]:
    """Valid text mixing one to three scripts, up to LONGEST bytes of UTF-8."""
    keys = []
    for _ in range(count):
        ranges = rng.sample(SCRIPTS, rng.randint(1, 3))
        chars: list[str] = []
        budget = rng.randint(0, LONGEST)
        while True:
            low, high = rng.choice(ranges)
            code = rng.randint(low, high)
            if 0xD800 <= code <= 0xDFFF:
                continue
            char = chr(code)
            if len("".join(chars).encode()) + len(char.encode()) > budget:
                break
            chars.append(char)
        keys.append("".join(chars))
    return keys


def byte_keys(rng: random.Random) -> list[bytes]:
    """Eight keys of arbitrary bytes at every length 0..LONGEST (invalid UTF-8 included)."""
    return [rng.randbytes(length) for length in range(LONGEST + 1) for _ in range(8)]


def surrogate_keys(rng: random.Random, count: int) -> list[str]:
    """Text with lone high or low surrogates at random places."""
    keys = []
    for text in text_keys(rng, count):
        chars = list(text)
        for _ in range(rng.randint(1, 4)):
            chars.insert(rng.randint(0, len(chars)), chr(rng.randint(0xD800, 0xDFFF)))
        keys.append("".join(chars))
    return keys


def test_the_udf_equals_the_brokers_murmur3_on_every_length(hash_oracle: HashOracle) -> None:
    keys = byte_keys(random.Random(3))
    answers = hash_oracle.ask(keys)
    assert [a[0] for a in answers] == keys
    assert_equal(keys, answers)
    assert {len(k) for k in keys} == set(range(LONGEST + 1))


def test_the_udf_equals_the_brokers_murmur3_on_text_of_every_script(
    hash_oracle: HashOracle,
) -> None:
    texts = text_keys(random.Random(5), 4000)
    keys = [t.encode("utf-8") for t in texts]
    answers = hash_oracle.ask(keys)
    assert_equal(keys, answers)
    # and the Java client's encoding of the same strings is their UTF-8
    assert [a[0] for a in hash_oracle.ask(texts[:500])] == keys[:500]


def test_a_lone_surrogate_is_hashed_as_the_java_client_encodes_it(
    hash_oracle: HashOracle,
) -> None:
    texts = surrogate_keys(random.Random(9), 500)
    answers = hash_oracle.ask(texts)
    assert [a[0] for a in answers] == [java_utf8(t) for t in texts]
    assert_equal([a[0] for a in answers], answers)


def java_utf8(text: str) -> bytes:
    """Java's `getBytes(UTF_8)`, as the Java client and Spark's UTF8String encode: a high and a
    low surrogate side by side are one character, a lone one becomes '?'."""
    joined = text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
    return joined.encode("utf-8", "replace")


def assert_equal(keys: list[bytes], answers: list[tuple[bytes, int, int]]) -> None:
    """The broker, the UDF, the scalar and the vectorised hash agree on every key."""
    vectorised = murmur3_31_array(pa.array(keys, pa.binary())).tolist()
    wrong = [
        (key, broker, udf, murmur3_31(key), vector)
        for key, (_, broker, udf), vector in zip(keys, answers, vectorised, strict=True)
        if not broker == udf == murmur3_31(key) == vector
    ]
    assert not wrong, f"{len(wrong)} of {len(keys)} keys differ, first: {wrong[:3]}"
