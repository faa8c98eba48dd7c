"""`python -m pulsar_lens ...` is the `pulsar-lens` command."""

from pulsar_lens.cli.main import run

raise SystemExit(run())
