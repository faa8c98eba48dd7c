"""The one switch for everything that changes a cluster: PULSAR_LENS_ALLOW_MUTATIONS.

Pulsar Lens reads; it writes to a cluster only where an operator said so. Probes (they create
topics and subscriptions) and the unload drill (it moves a bundle) ask `require_mutations`
first, and say what they will create or change.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from core.errors import MutationsDisabled

ALLOW_MUTATIONS = "PULSAR_LENS_ALLOW_MUTATIONS"
_YES = {"1", "true", "yes", "on"}


def mutations_allowed(environ: Mapping[str, str] | None = None) -> bool:
    """Whether PULSAR_LENS_ALLOW_MUTATIONS is set to 1, true, yes or on."""
    env = os.environ if environ is None else environ
    return (env.get(ALLOW_MUTATIONS) or "").strip().lower() in _YES


def require_mutations(what: str, environ: Mapping[str, str] | None = None) -> None:
    """Raise MutationsDisabled, naming `what` would change, unless mutations are enabled."""
    if not mutations_allowed(environ):
        raise MutationsDisabled(
            f"{what} changes the cluster; Pulsar Lens is read-only unless "
            f"{ALLOW_MUTATIONS}=1 is set"
        )
