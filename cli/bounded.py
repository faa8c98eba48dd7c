"""`pulsar-lens analyze` output within bounds: a result may hold 65,536 ranges per consumer
and names of thousands of characters, which no terminal or pipe wants whole.

Each frame is cut to its first `max_rows` rows, each text (a cell, a summary value) to
`max_text` characters, each summary list to `max_rows` items; 0 lifts a bound. What was cut
is said once, in `Cut`, never per cell.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `pulsar-lens plugins` imports this module; only `analyze` needs pandas
    import pandas as pd

MAX_ROWS = 1000
MAX_TEXT = 1000
MARK = "…"


@dataclass
class Cut:
    """What the bounds left out: rows per frame (how many there were), summary keys whose
    lists were cut, and how many texts were shortened."""

    max_rows: int
    max_text: int
    frames: dict[str, int] = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)
    texts: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "max_rows": self.max_rows,
            "max_text": self.max_text,
            "frames_rows": self.frames,
            "summary_lists": self.summary,
            "texts_shortened": self.texts,
        }

    def said(self) -> str:
        """One line for the text output, empty when nothing was cut."""
        first = f"first {self.max_rows}"
        parts = [f"{name}: {first} of {rows} rows" for name, rows in self.frames.items()]
        parts += [f"summary {key}: {first} items" for key in self.summary]
        if self.texts:
            parts.append(f"{self.texts} text(s) cut to {self.max_text} characters")
        return ("cut (--max-rows, --max-text; 0 shows all): " + "; ".join(parts)) if parts else ""


def _text(value: Any, cut: Cut) -> Any:
    if isinstance(value, str) and cut.max_text and len(value) > cut.max_text:
        cut.texts += 1
        return value[: cut.max_text - 1] + MARK
    return value


def bounded_frame(name: str, frame: pd.DataFrame, cut: Cut) -> pd.DataFrame:
    """The frame's first rows, its texts shortened; what was cut is added to `cut`."""
    import pandas as pd
    from pandas.api.types import is_object_dtype, is_string_dtype

    if cut.max_rows and len(frame) > cut.max_rows:
        cut.frames[name] = len(frame)
        frame = frame.head(cut.max_rows)
    if not cut.max_text:
        return frame
    out = frame.copy()
    for column in out.columns:
        kind = out[column].dtype
        if is_object_dtype(kind) or is_string_dtype(kind) or isinstance(kind, pd.CategoricalDtype):
            out[column] = [_text(v, cut) for v in out[column].astype(object).tolist()]
    return out


def bounded_summary(summary: Mapping[str, Any], cut: Cut) -> dict[str, Any]:
    """The summary with long lists and texts cut (one level deep, as summaries are)."""
    out: dict[str, Any] = {}
    for key, value in summary.items():
        if isinstance(value, list | tuple) and cut.max_rows and len(value) > cut.max_rows:
            cut.summary.append(key)
            value = list(value)[: cut.max_rows]
        if isinstance(value, list | tuple):
            value = [_text(v, cut) for v in value]
        elif isinstance(value, Mapping):
            value = {k: _text(v, cut) for k, v in value.items()}
        out[key] = _text(value, cut)
    return out
