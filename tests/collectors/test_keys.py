"""The key sampler's pure parts: sticky key resolution from message objects, the bounded read
loop, and where the client token comes from."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pulsar_lens.collectors.client_auth import client_token
from pulsar_lens.collectors.keys import (
    RECONNECT_ASKS,
    RECONNECT_PAUSE,
    TopicSample,
    read_window,
    resolve_message_key,
    to_record,
)
from pulsar_lens.core.hashing import NONE_KEY, sticky_key_hash
from pulsar_lens.core.secrets import Secret
from pulsar_lens.core.settings import Settings

T0_MS = 1_800_000_000_000


@dataclass
class FakeMessage:
    """The accessors of pulsar-client 3.13's Message that the sampler uses ("" = absent)."""

    ordering: str = ""
    partition: str = ""
    producer: str = "prod-1"
    published: int = T0_MS
    ident: str = "1:0:-1:-1"
    bad_key: bool = False  # the client raises when a key is not valid UTF-8

    def ordering_key(self) -> str:
        if self.bad_key:
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
        return self.ordering

    def partition_key(self) -> str:
        return self.partition

    def producer_name(self) -> str:
        return self.producer

    def publish_timestamp(self) -> int:
        return self.published

    def message_id(self) -> str:
        return self.ident


@dataclass
class SequencedMessage(FakeMessage):
    """A message object from a client that exposes the sequence id."""

    sequence: int = 41

    def sequence_id(self) -> int:
        return self.sequence


def test_resolve_message_key_prefers_the_ordering_key() -> None:
    assert resolve_message_key(FakeMessage(ordering="ok", partition="pk")) == b"ok"


def test_resolve_message_key_falls_back_to_the_partition_key() -> None:
    assert resolve_message_key(FakeMessage(partition="pk-é")) == "pk-é".encode()


def test_resolve_message_key_of_a_keyless_message_without_sequence_id_is_unresolved() -> None:
    assert resolve_message_key(FakeMessage()) is None


def test_resolve_message_key_builds_the_4_0_fallback_when_the_sequence_id_is_exposed() -> None:
    assert resolve_message_key(SequencedMessage(producer="p-0", sequence=41)) == b"p-0-41"


def test_resolve_message_key_never_answers_none_key() -> None:
    assert resolve_message_key(SequencedMessage(producer="")) is None
    assert resolve_message_key(FakeMessage(producer="")) != NONE_KEY


def test_resolve_message_key_of_an_undecodable_key_is_unresolved() -> None:
    assert resolve_message_key(FakeMessage(bad_key=True)) is None


def test_to_record_carries_key_consistent_hash_and_publish_time() -> None:
    record = to_record("persistent://public/default/t", FakeMessage(partition="order-42"))
    assert record is not None
    assert record.key == "order-42"
    assert record.sticky_hash == sticky_key_hash(b"order-42", selector="consistent")
    assert record.publish_time == dt.datetime.fromtimestamp(T0_MS / 1000, tz=dt.UTC)


class Timeout(Exception):
    pass


@dataclass
class FakeReader:
    """Hands out `messages` in order; read_next raises Timeout when `stall` says so."""

    messages: list[FakeMessage]
    stall: bool = False
    clock: list[float] = field(default_factory=lambda: [0.0])
    reads: int = 0

    def has_message_available(self) -> bool:
        return self.stall or self.reads < len(self.messages)

    def read_next(self, timeout_millis: int | None = None) -> FakeMessage:
        if self.stall:
            self.clock[0] += (timeout_millis or 0) / 1000
            raise Timeout
        self.reads += 1
        self.clock[0] += 0.001
        return self.messages[self.reads - 1]


def keyed(n: int, *, start: int = 0, published: int = T0_MS) -> list[FakeMessage]:
    return [
        FakeMessage(partition=f"k{i % 3}", ident=f"1:{i}:-1:-1", published=published)
        for i in range(start, start + n)
    ]


def read(
    reader: FakeReader, *, limit: int = 100, deadline: float = 10.0, since: int = 0
) -> TopicSample:
    return read_window(
        reader,
        "t",
        since_ms=since,
        limit=limit,
        deadline=deadline,
        clock=lambda: reader.clock[0],
        timeout_error=Timeout,
    )


def test_read_window_stops_when_caught_up() -> None:
    sample = read(FakeReader(keyed(5)))
    assert (sample.read, len(sample.records), sample.stopped) == (5, 5, "caught-up")


def test_read_window_stops_at_the_message_limit() -> None:
    reader = FakeReader(keyed(50))
    sample = read(reader, limit=7)
    assert (sample.read, reader.reads, sample.stopped) == (7, 7, "limit")


def test_read_window_stops_at_the_deadline_while_reads_time_out() -> None:
    reader = FakeReader([], stall=True)
    sample = read(reader, deadline=3.5)
    assert sample.stopped == "time" and sample.read == 0
    assert 3.5 <= reader.clock[0] <= 4.5  # one read wait past the deadline at most


def test_read_window_skips_messages_older_than_the_window_and_redeliveries() -> None:
    old = keyed(3, published=T0_MS - 60_000)
    fresh = keyed(4, start=3)
    again = [fresh[0]]
    sample = read(FakeReader([*old, *fresh, *again]), since=T0_MS - 1000)
    assert sample.read == 4 and [r.key for r in sample.records] == ["k0", "k1", "k2", "k0"]


def test_read_window_skipping_is_bounded_too() -> None:
    reader = FakeReader(keyed(1000, published=T0_MS - 60_000))
    sample = read(reader, limit=10, since=T0_MS)
    assert (sample.read, reader.reads, sample.stopped) == (0, 10, "limit")


def test_read_window_counts_unresolved_messages_without_records() -> None:
    messages = [*keyed(2), FakeMessage(ident="9:9:-1:-1"), FakeMessage(ident="9:10:-1:-1")]
    sample = read(FakeReader(messages))
    assert (sample.read, sample.unresolved, len(sample.records)) == (4, 2, 2)


def token_of(env: dict[str, str]) -> Secret | None:
    """The binary client's token of the settings `env` describes."""
    settings = Settings.from_env(env)
    return client_token(settings.cluster, shared=settings.client_token)


def test_client_token_prefers_the_client_token_then_the_admin_token() -> None:
    both = {"PULSAR_CLIENT_TOKEN": "client", "PULSAR_ADMIN_TOKEN": "admin"}
    token = token_of(both)
    assert token is not None and token.reveal() == "client"
    admin = token_of({"PULSAR_ADMIN_TOKEN": "admin"})
    assert admin is not None and admin.reveal() == "admin"
    assert token_of({}) is None


def test_client_token_reads_the_admin_token_file_and_hides_it(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("s3cret\n", encoding="utf-8")
    token = token_of({"PULSAR_ADMIN_TOKEN_FILE": str(path)})
    assert token is not None and token.reveal() == "s3cret"
    assert "s3cret" not in repr(token) and "s3cret" not in str(token)


@pytest.mark.parametrize("value", ["", "  "])
def test_client_token_ignores_empty_variables(value: str) -> None:
    assert token_of({"PULSAR_CLIENT_TOKEN": value}) is None


class Reconnecting(Exception):
    pass


@dataclass
class ReconnectingReader(FakeReader):
    """Fails its first `failing` asks for the last message id, as a reader whose consumer the
    broker dropped for its seek does until the client has it back."""

    failing: int = 0
    asks: int = 0

    def has_message_available(self) -> bool:
        self.asks += 1
        if self.asks <= self.failing:
            raise Reconnecting("Consumer not found")
        return super().has_message_available()


def read_reconnecting(reader: ReconnectingReader, pauses: list[float]) -> TopicSample:
    def pause(seconds: float) -> None:
        pauses.append(seconds)
        reader.clock[0] += seconds

    return read_window(
        reader,
        "t",
        since_ms=0,
        limit=100,
        deadline=10.0,
        clock=lambda: reader.clock[0],
        timeout_error=Timeout,
        reconnecting=(Reconnecting,),
        pause=pause,
    )


def test_read_window_asks_again_while_the_reader_reconnects_after_its_seek() -> None:
    pauses: list[float] = []
    sample = read_reconnecting(ReconnectingReader(keyed(5), failing=3), pauses)
    assert (sample.read, sample.stopped) == (5, "caught-up")
    assert pauses == [RECONNECT_PAUSE] * 3


def test_read_window_gives_up_a_reader_that_never_reconnects() -> None:
    pauses: list[float] = []
    with pytest.raises(Reconnecting):
        read_reconnecting(ReconnectingReader(keyed(5), failing=10**6), pauses)
    assert len(pauses) == RECONNECT_ASKS - 1
