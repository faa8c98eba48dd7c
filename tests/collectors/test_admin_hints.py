"""What an admin call's failure tells the user to do (`collectors.admin_hints`)."""

from __future__ import annotations

from pulsar_lens.collectors.admin_hints import too_large_hint

MIB = 1024 * 1024


def test_too_large_hint_says_what_cap_to_set_and_why() -> None:
    hint = too_large_hint(256 * MIB)
    assert hint.startswith("the answer is larger than 256 MiB (PULSAR_LENS_MAX_RESPONSE)")
    assert "set PULSAR_LENS_MAX_RESPONSE=512 or more" in hint
    assert "1.7 kB a topic" in hint
    assert "about 157,903 topics" in hint


def test_too_large_hint_at_the_largest_cap_asks_for_nothing_it_cannot_take() -> None:
    hint = too_large_hint(4096 * MIB)
    assert hint == "the answer is larger than 4096 MiB (PULSAR_LENS_MAX_RESPONSE); it was not read"
    assert "=" not in too_large_hint(4096 * MIB)
    assert "PULSAR_LENS_MAX_RESPONSE=4096" in too_large_hint(3000 * MIB)
