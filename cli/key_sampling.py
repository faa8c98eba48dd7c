"""The key sampling options of `pulsar-lens collect` and the loop hooks they turn into.

Sampling is off unless `--sample-keys` or PULSAR_LENS_KEY_SAMPLING=1: it reads message keys,
which is reading data.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from pulsar_lens.core.values import DEFAULT_MAX_TOPICS

if TYPE_CHECKING:  # the sampler (pyarrow, the client) loads once a collect runs
    from pulsar_lens.collectors.heartbeat import HeartbeatFn
    from pulsar_lens.collectors.loop import PollFn
    from pulsar_lens.core.settings import Settings
    from pulsar_lens.core.store import Store

PollHook = Callable[["PollFn"], "PollFn"]
BeatHook = Callable[["HeartbeatFn"], "HeartbeatFn"]


def add_sampling_args(p: argparse.ArgumentParser, *, positive: Callable[[str], int]) -> None:
    g = p.add_argument_group(
        "key sampling",
        "read the keys of recent messages with a non-durable Reader (no durable subscription, "
        "no cursor moved) into the key_samples table",
    )
    g.add_argument(
        "--sample-keys",
        action="store_true",
        default=None,
        help="sample message keys after polls (default PULSAR_LENS_KEY_SAMPLING, off)",
    )
    g.add_argument(
        "--sample-every",
        type=positive,
        default=1,
        metavar="N",
        help="sample after every Nth stored poll (1)",
    )
    g.add_argument(
        "--sample-topics",
        metavar="PATTERN",
        help="sample the topics matching this shell pattern, e.g. 'persistent://public/demo/*' "
        f"(default: the Key_Shared topics of the poll; at most {DEFAULT_MAX_TOPICS} per round)",
    )
    g.add_argument(
        "--service-url",
        help="binary protocol URL for sampling (default PULSAR_SERVICE_URL, else the broker's)",
    )
    p.set_defaults(key_collect=None)  # None: `collectors.keys.collect_key_samples`


def sampling_hooks(
    args: argparse.Namespace, settings: Settings, store: Store
) -> tuple[PollHook, BeatHook]:
    """How to wrap the loop's poll and heartbeat functions; both identity when sampling is off."""
    if not (args.sample_keys or settings.key_sampling):
        return _same_poll, _same_beat
    from pulsar_lens.collectors.client_auth import client_token
    from pulsar_lens.collectors.keys import collect_key_samples
    from pulsar_lens.collectors.sampling import KeySampling

    sampling = KeySampling(
        store,
        service_url=args.service_url or settings.service_url,
        every=args.sample_every,
        pattern=args.sample_topics,
        token=client_token(settings.cluster, shared=settings.client_token),
        connection=settings.cluster,
        collect=collect_key_samples if args.key_collect is None else args.key_collect,
    )
    return sampling.wrap, sampling.after


def _same_poll(poll: PollFn) -> PollFn:
    return poll


def _same_beat(beat: HeartbeatFn) -> HeartbeatFn:
    return beat
