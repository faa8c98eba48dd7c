"""Which broker line's selector models an analysis of a snapshot uses.

The `brokers` table holds the version each broker reported (`version`). A snapshot whose
brokers all run 3.0.x gets the 3.0 models; any other (4.0.x, 4.2.x, a mix during an
upgrade, or no version known) the 4.0 ones, which are the default (`core.pulsarvalues.model_line`
reads one version). `key-shared-map`, `sticky-ranges` and `key-distribution` (on the
newest poll's brokers) say on their pages which line they modelled and the versions that
answered.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from pulsar_lens.core.hashing import PulsarLine
from pulsar_lens.core.pulsarvalues import model_line


@dataclass(frozen=True)
class BrokerLine:
    """The modelled line and the versions the snapshot's brokers reported."""

    line: PulsarLine
    versions: tuple[str, ...]

    def caption(self) -> str:
        """'Pulsar 3.0 model (brokers: 3.0.7)'; without a version, the default says so."""
        said = ", ".join(self.versions) if self.versions else "version unknown"
        return f"Pulsar {self.line} model (brokers: {said})"


def broker_line(brokers: pd.DataFrame) -> BrokerLine:
    """The line to model for the brokers of a snapshot (see the module docstring)."""
    known: set[str] = set()
    if len(brokers) and "version" in brokers:
        known = {str(v) for v in brokers["version"].dropna() if str(v)}
    versions = tuple(sorted(known))
    on_3_0 = bool(versions) and all(model_line(v) == "3.0" for v in versions)
    return BrokerLine("3.0" if on_3_0 else "4.0", versions)
