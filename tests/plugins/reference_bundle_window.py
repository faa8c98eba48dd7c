"""bundle-ownership as it was before steps (plugin version 1.0): the whole window of topics and
consumers read at every pass and the bundles reloaded at each poll found from it at once
(`events.whole_window`, `Renewals`). Kept only as the reference the stepped analysis must
equal (tests/plugins/test_bundle_steps.py, benchmarks/results_pass.py); not product code.

`WHOLE_WINDOW` swaps make `BundleOwnership` this analysis (`tests.plugins.swaps.swapped`).
"""

from __future__ import annotations

from typing import Any

from pulsar_lens.api import AnalysisPlugin, Inputs, Result
from pulsar_lens.plugins.builtin import bundle_ownership
from pulsar_lens.plugins.builtin.bundle_ownership import events


def analyze(self: Any, data: Inputs, params: Any) -> Result:
    """`BundleOwnership.analyze` of plugin version 1.0."""
    reloaded = events.whole_window(
        data.history("bundles"), data.history("topics"), data.history("consumers"), data.snapshots
    )
    return bundle_ownership.ownership(data, params, reloaded, data.history("events"))


PLUGIN = bundle_ownership.BundleOwnership
WHOLE_WINDOW: tuple[tuple[Any, str, Any], ...] = (
    (PLUGIN, "inputs", ("bundles", "topics", "consumers", "events", "brokers")),
    (PLUGIN, "history_of", {}),
    (PLUGIN, "step_inputs", ()),
    (PLUGIN, "step_outputs", ()),
    (PLUGIN, "step", AnalysisPlugin.step),
    (PLUGIN, "analyze", analyze),
)
"""(object, name, value) making `BundleOwnership` the whole-window analysis above."""
