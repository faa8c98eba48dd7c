"""The synthetic cluster of the scale harness renders the next poll's answers when asked
(`--render-on-request`), or, when nobody asked in time, at the start of the poll that needs
them; a poll never waits forever and never skips a generation."""

from __future__ import annotations

import json

from benchmarks.synth_server import SynthCluster, answer

BROKERS = ["127.0.0.1:9001", "127.0.0.1:9002"]


def poll(cluster: SynthCluster) -> int:
    """One poll's first call and its bulk answers; the generation it was served."""
    answer(cluster, BROKERS[0], "/admin/v2/clusters", "")
    for broker in BROKERS:
        status, _, _ = answer(cluster, broker, "/admin/v2/broker-stats/topics", "")[1]
        assert status == 200
    return cluster.current.number


def test_the_next_generation_is_rendered_only_when_asked_for() -> None:
    cluster = SynthCluster(200, BROKERS, change=0.1, render_on_request=True)
    assert poll(cluster) == 0
    assert cluster.next is None and not cluster.rendering  # nothing rendered behind the poll
    family, (status, body, _) = answer(cluster, BROKERS[0], "/__synth/render", "")
    assert (family, status, json.loads(body)) == ("control", 200, {"started": True})
    with cluster.ready:
        assert cluster.ready.wait_for(lambda: cluster.next is not None, timeout=120)
    assert json.loads(answer(cluster, BROKERS[0], "/__synth/render", "")[1][1]) == {
        "started": False  # rendered already: not twice
    }
    assert poll(cluster) == 1
    assert cluster.next is None  # and the one after waits for its own request


def test_a_poll_nobody_rendered_for_renders_and_waits() -> None:
    cluster = SynthCluster(200, BROKERS, change=0.1, render_on_request=True)
    assert [poll(cluster) for _ in range(3)] == [0, 1, 2]
    assert [g["generation"] for g in cluster.history] == [0, 1, 2]


def test_without_the_flag_the_next_generation_is_rendered_at_each_poll() -> None:
    cluster = SynthCluster(200, BROKERS, change=0.1)
    cluster.render_next()  # as the server does when it starts
    assert [poll(cluster) for _ in range(3)] == [0, 1, 2]
    with cluster.ready:  # rendered behind the third poll
        assert cluster.ready.wait_for(lambda: cluster.next is not None, timeout=120)


def test_an_answer_leaves_in_one_go() -> None:
    """Headers and body are written apart; with Nagle's algorithm on, the body waited for
    the client's delayed ACK of the headers (some 40 ms a call on a kept-alive connection,
    which a real broker does not add)."""
    from benchmarks.synth_server import handler_for

    cluster = SynthCluster(50, BROKERS, change=0.0)
    assert handler_for(cluster, lambda: BROKERS[0]).disable_nagle_algorithm is True
