"""The switches for everything that changes a cluster.

Pulsar Lens reads; it writes to a cluster only where an operator said so. Probes (they create
topics and subscriptions) and the unload drill (it moves a bundle) ask `require_mutations`
first, and say what they will create or change. A drill asked for from the dashboard needs
more: PULSAR_LENS_DASHBOARD_MUTATIONS as well, and a logged-in user to name as the requester
(the dashboard's login, or the header a trusted login proxy sets, named by
PULSAR_LENS_TRUSTED_USER_HEADER); the collect process checks both again before it runs one.
"""

from __future__ import annotations

import re

from pulsar_lens.core.errors import MutationsDisabled
from pulsar_lens.core.parts import (
    ALLOW_MUTATIONS,
    DASHBOARD_MUTATIONS,
    TRUSTED_USER_HEADER,
    MutationSettings,
)

__all__ = [
    "ALLOW_MUTATIONS",
    "DASHBOARD_MUTATIONS",
    "MAX_REQUESTER",
    "TRUSTED_USER_HEADER",
    "MutationSettings",
    "dashboard_mutations_problem",
    "mutations_allowed",
    "requester_of",
    "require_mutations",
]

MAX_REQUESTER = 200  # characters: an e-mail address or a directory name fits with room
# printable text only: a requester is logged and shown, and a control character could forge
# a log line or hide what follows it
_PRINTABLE = re.compile(r"[^\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def mutations_allowed(switches: MutationSettings) -> bool:
    """Whether PULSAR_LENS_ALLOW_MUTATIONS is set to 1, true, yes or on."""
    return switches.allow


def require_mutations(what: str, switches: MutationSettings) -> None:
    """Raise MutationsDisabled, naming `what` would change, unless mutations are enabled."""
    if not switches.allow:
        raise MutationsDisabled(
            f"{what} changes the cluster; Pulsar Lens is read-only unless "
            f"{ALLOW_MUTATIONS}=1 is set",
            setting=ALLOW_MUTATIONS,
        )


def dashboard_mutations_problem(switches: MutationSettings) -> str | None:
    """Why this process takes no change to the cluster from the dashboard, or None when
    both PULSAR_LENS_ALLOW_MUTATIONS and PULSAR_LENS_DASHBOARD_MUTATIONS are on."""
    for name, on in ((ALLOW_MUTATIONS, switches.allow), (DASHBOARD_MUTATIONS, switches.dashboard)):
        if not on:
            return f"{name} is not set to 1"
    return None


def requester_of(value: object) -> str | None:
    """`value` as the name of the user who asked for a change, stripped; None when it names
    nobody: not a string, blank, longer than MAX_REQUESTER, or holding control characters."""
    if not isinstance(value, str):
        return None
    name = value.strip()
    if not name or len(name) > MAX_REQUESTER or not _PRINTABLE.fullmatch(name):
        return None
    return name
