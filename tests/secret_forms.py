"""Every form a secret can take in a text the product writes: as it is, base64 (standard and
URL-safe, padded or not) and percent-encoded (either hex case, a path's, a form's `+`)."""

from __future__ import annotations

import base64
import re
from urllib.parse import quote, quote_plus


def encodings(secret: str) -> dict[str, str]:
    raw = secret.encode()
    std, safe = base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()
    percent = quote(secret, safe="")
    return {
        "raw": secret,
        "base64": std,
        "base64-unpadded": std.rstrip("="),
        "base64-urlsafe": safe,
        "base64-urlsafe-unpadded": safe.rstrip("="),
        "percent": percent,
        "percent-lower": re.sub(r"%[0-9A-F]{2}", lambda m: m[0].lower(), percent),
        "percent-path": quote(secret),
        "percent-plus": quote_plus(secret, safe=""),
    }
