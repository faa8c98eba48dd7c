"""The recorded releases, one run of a test per release."""

from __future__ import annotations

import pytest

from tests.collectors.recorded import RECORDINGS, Recording


@pytest.fixture(params=RECORDINGS, ids=str)
def recording(request: pytest.FixtureRequest) -> Recording:
    """A recorded release (4.0.7, 3.0.7): a test taking it replays each release's answers."""
    recorded: Recording = request.param
    return recorded
