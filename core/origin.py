"""What a plugin raised, as text that crosses processes and is stored: `Origin` and
`origin_of()`. The errors that carry one (`origin`) are in `core.errors`, which re-exports both.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pulsar_lens.core.secrets import redact

MESSAGE_LIMIT = 2000
"""Characters of a plugin exception's message kept (a Spark error quotes its whole plan)."""
TRACEBACK_LIMIT = 20_000
"""Characters of a traceback kept: its end, where the exception was raised."""


@dataclass(frozen=True, slots=True)
class Origin:
    """An exception beneath one of ours, as text that crosses processes and is stored.

    `file` and `line` are those of the innermost frame in the plugin's own code (the frame an
    author looks for), else of the innermost frame; `traceback` starts at the plugin's first
    frame, so none of this product's frames come before it.
    """

    kind: str  # the exception's type, e.g. "ZeroDivisionError"
    message: str
    file: str | None = None
    line: int | None = None
    traceback: str = ""

    def __str__(self) -> str:
        text = f"{self.kind}: {self.message}" if self.message else self.kind
        return f"{text} (at {self.where})" if self.where else text

    @property
    def where(self) -> str:
        """`file:line`, or '' when not known."""
        if self.file is None:
            return ""
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def redacted(self) -> Origin:
        return replace(self, message=redact(self.message), traceback=redact(self.traceback))

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "traceback": self.traceback,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Origin:
        line = data.get("line")
        file = data.get("file")
        return cls(
            kind=str(data.get("kind") or "Exception"),
            message=str(data.get("message") or ""),
            file=None if file is None else str(file),
            line=line if isinstance(line, int) else None,
            traceback=str(data.get("traceback") or ""),
        )


def origin_of(exc: BaseException, *, home: str | None = None) -> Origin:
    """`exc` as an `Origin`, its location and traceback taken in `home` (the plugin's file, or
    its package's folder) when any frame is there.

    Formatted where `exc` was raised: its frames do not survive a process boundary.
    """
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [i for i, frame in enumerate(frames) if _inside(frame.filename, home)]
    tb = exc.__traceback__
    for _ in range(mine[0] if mine else 0):  # start the traceback at the plugin's first frame
        tb = tb.tb_next if tb is not None else None
    if isinstance(exc, SyntaxError) and not mine:
        tb = None  # raised compiling the file: its own lines say where, ours are noise
    text = "".join(traceback.TracebackException(type(exc), exc, tb).format())
    if len(text) > TRACEBACK_LIMIT:
        text = "… (the start is cut)\n" + text[-TRACEBACK_LIMIT:]
    file: str | None = None
    line: int | None = None
    if isinstance(exc, SyntaxError) and exc.filename:  # raised while compiling, not in a frame
        file, line = exc.filename, exc.lineno
    elif frames:
        frame = frames[mine[-1] if mine else -1]
        file, line = frame.filename, frame.lineno
    message = str(exc)
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 1] + "…"
    return Origin(type(exc).__name__, message, file, line, text)


def _inside(filename: str, home: str | None) -> bool:
    if not home:
        return False
    return filename == home or Path(filename).is_relative_to(home)
