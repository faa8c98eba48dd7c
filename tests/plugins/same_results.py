"""Two ways of running the light pass must store the same results: the check both share."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from pulsar_lens.api import AnalysisPlugin
from pulsar_lens.plugins import runner
from pulsar_lens.plugins.registry import LoadedPlugin, instance_of
from pulsar_lens.plugins.results import ResultStore


def assert_same_results(
    light: Sequence[AnalysisPlugin | LoadedPlugin],
    first: Path,
    second: Path,
    window: runner.SnapshotStore,
) -> None:
    """Each of `light` stored a result (ok) in the stores at `first` and `second`, for the
    snapshots its window on `window` holds, with equal summaries and frames."""
    for plugin in light:
        instance = instance_of(plugin)
        params = runner.validate_params(instance, None).model_dump(mode="json")
        ids = [str(s) for s in runner.snapshot_window(instance, window)["snapshot_id"]]
        one, other = (
            ResultStore(root).read(instance.name, instance.version, params, ids)
            for root in (first, second)
        )
        assert one is not None and other is not None, instance.name
        assert (one.status, one.error) == (other.status, other.error), instance.name
        assert one.status == "ok", (instance.name, one.error)
        assert one.result is not None and other.result is not None
        assert one.result.summary == other.result.summary, instance.name
        assert list(one.result.frames) == list(other.result.frames), instance.name
        for name, frame in other.result.frames.items():
            pd.testing.assert_frame_equal(one.result.frames[name], frame, obj=instance.name)
