"""Pulsar Lens: an operations dashboard for Apache Pulsar clusters.

The repository keeps its parts at the top (`core/`, `collectors/`, `plugins/`, `dashboard/`,
`exporter/`, `cli/`, `lab/`); the installed distribution holds them under this one name
(`pulsar_lens.core`, ...), mapped in pyproject.toml. A plugin imports only `pulsar_lens.api`.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pulsar-lens")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
