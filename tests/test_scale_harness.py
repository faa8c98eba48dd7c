"""The scale harness (`reliability/scale.py`) at 5,000 topics and two polls: the real
`pulsar-lens collect` process polls the synthetic cluster over loopback HTTP, and the store
holds every topic, subscription and consumer each poll was served, and a result of every
light analysis for the last poll; every page is timed cold and reports a figure. Correctness
only: no figure is compared with a time (`make scale` runs the sizes that matter)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reliability import scale

TOPICS = 5_000


@pytest.mark.timeout(1500)
def test_collect_stores_all_the_synthetic_cluster_served(tmp_path: Path) -> None:
    figures = scale.run_size(
        TOPICS,
        polls=2,
        change=0.1,
        brokers=None,
        interval=None,
        work=tmp_path,
        pages=True,
        check=True,
    )
    assert figures["problems"] == []
    server = figures["server"]
    assert server["not_found"] == {}  # every call a poll makes is one the server answers
    assert server["requests"]["broker_topic_stats"] >= 2 * 3  # each broker's own bulk answer
    generations = server["generations"]
    assert [g["generation"] for g in generations[:2]] == [0, 1]
    assert generations[1]["consumers"] != generations[0]["consumers"]  # consumers came and went
    first, second = figures["stages"]
    assert first["topics"] == second["topics"] == TOPICS
    assert second["row_counts"]["consumers"] == generations[1]["consumers"]
    assert second["row_counts"]["events"] > 0  # what changed between the polls became events
    assert all(s["write_seconds"] is not None for s in figures["stages"])
    for stage in figures["stages"]:  # the peak so far, read after the write and the analyses
        assert 0 < stage["peak_mib_after_write"] <= stage["peak_mib_after_analyses"]
    assert figures["stages"][-1]["peak_mib_after_analyses"] <= figures["collect"]["peak_rss_mib"]
    for stage in figures["stages"]:  # the whole path, poll start to stored analyses
        assert 0 < stage["poll_to_heartbeat_seconds"] <= stage["poll_to_stored_seconds"]
        # stamped when written, the results are stored before the harness sees them
        assert stage["poll_to_stored_seconds"] <= stage["poll_to_seen_seconds"]
        assert set(stage["plugins"]) >= set(scale.light_plugins())  # as each poll stored them
    assert figures["metrics"]["families"] > 0
    collect = figures["collect"]
    assert 0 < collect["peak_rss_mib"] <= collect["tree_peak_rss_mib"]
    assert 0 < collect["tree_peak_pss_mib"] <= collect["tree_peak_rss_mib"]
    pages = figures["pages"]
    assert "error" not in pages, pages.get("error")
    assert pages["problems"] == [], pages["problems"]
    from benchmarks import dashboard as bench
    from pulsar_lens.plugins.registry import discover

    assert set(pages["cold_seconds"]) == set(bench.page_list(list(discover())))
