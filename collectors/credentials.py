"""Credentials kept in files: the admin token file, read the same way by the admin client, the
OAuth2 flow's token fallback and the binary-protocol clients."""

from __future__ import annotations

import os
from pathlib import Path

from core.errors import CollectorError


def read_token_file(path: str | os.PathLike[str]) -> str:
    """The token stored in `path`, stripped; a clear error (never the content) if unreadable."""
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise CollectorError(
            f"cannot read the admin token file {os.fspath(path)!r}: {exc.strerror}; "
            "fix PULSAR_ADMIN_TOKEN_FILE"
        ) from None
    except UnicodeDecodeError:
        raise CollectorError(
            f"the admin token file {os.fspath(path)!r} is not UTF-8 text (a binary file?); "
            "it must hold the token itself, e.g. the output of `pulsar tokens create`"
        ) from None
    if not token:
        raise CollectorError(f"the admin token file {os.fspath(path)!r} is empty")
    return token
