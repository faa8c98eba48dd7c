"""Pulsar Lens: an operations dashboard for Apache Pulsar clusters.

The repository keeps its parts at the top (`core/`, `collectors/`, `plugins/`, `dashboard/`,
`exporter/`, `cli/`, `lab/`); the installed distribution holds them under this one name
(`pulsar_lens.core`, ...), mapped in pyproject.toml. A plugin imports only `pulsar_lens.api`.

`__version__` is the installed distribution's, read on first use: importlib.metadata costs
more than parsing a command line, so `pulsar-lens --help` does not pay for it.
"""

from __future__ import annotations

import functools


@functools.cache
def version() -> str:
    """The version of the installed distribution (`0+unknown` in a source tree never
    installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("pulsar-lens")
    except PackageNotFoundError:
        return "0+unknown"


def __getattr__(name: str) -> str:
    if name == "__version__":
        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
