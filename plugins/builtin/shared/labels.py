"""How the Key_Shared pages and their links name one subscription: `topic | subscription`."""

from __future__ import annotations


def subscription_label(topic: str, subscription: str) -> str:
    """A subscription as the `subscription` control of the Key_Shared and key-distribution
    pages names it (the text is compared whole, never split: a name may hold ` | `)."""
    return f"{topic} | {subscription}"
