"""Reading a file that holds a credential (a token, OAuth2 client credentials), bounded.

A credential is a few hundred bytes to a few KiB. `read_secret_file` opens without blocking
(a FIFO with no writer would wait forever), refuses anything but a regular file (`/dev/zero`,
a FIFO, a socket, a folder) and reads at most `MAX_SECRET_FILE` bytes, refusing a larger file
rather than holding gigabytes in memory. Its errors say why and never quote the content.
"""

from __future__ import annotations

import os
import stat

MAX_SECRET_FILE = 64 * 1024
TOO_LARGE = (
    f"is larger than {MAX_SECRET_FILE // 1024} KiB, more than any credential (is it the right "
    "file?); it was not read"
)


class SecretFileError(ValueError):
    """The file cannot be a credential file: the message is a phrase that follows its path;
    `path` is that path."""

    def __init__(self, message: str = "", *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


def read_secret_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of `path`, at most `MAX_SECRET_FILE`; `SecretFileError` says why not."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise SecretFileError(f"cannot be read: {exc.strerror}", path=os.fspath(path)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SecretFileError(
                f"is not a regular file (it is {_kind(info.st_mode)})", path=os.fspath(path)
            )
        if info.st_size > MAX_SECRET_FILE:
            raise SecretFileError(TOO_LARGE, path=os.fspath(path))
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        # read to the bound, not to st_size: a file may grow, or (in /proc) say 0
        while size <= MAX_SECRET_FILE:
            chunk = os.read(fd, MAX_SECRET_FILE + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise SecretFileError(f"cannot be read: {exc.strerror}", path=os.fspath(path)) from None
    finally:
        os.close(fd)
    if size > MAX_SECRET_FILE:
        raise SecretFileError(TOO_LARGE, path=os.fspath(path))
    return b"".join(chunks)


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a plain file")
