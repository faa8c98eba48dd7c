"""The params form: one widget per field of a plugin's pydantic `Params`, bounded by the
field's own rules, with the values a plugin's `param_choices` allows as a selectbox. What a
visitor types is checked here (length, control characters, range) before the runner
validates it."""

from __future__ import annotations

import enum
import math
import types
import typing
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import annotated_types
import streamlit as st
from pydantic import BaseModel
from pydantic.fields import FieldInfo

MAX_CHOICES = 5000
"""Above this many allowed values a str param is typed, not picked from a list."""

MAX_TEXT_CHARS = 1000
"""The longest text a params field takes when its model sets no `max_length`."""
INT_LIMIT = 2**53 - 1
FLOAT_LIMIT = 1e15
"""The range of a number field whose model sets no bound of its own (the built-ins all do)."""


def params_form(
    model: type[BaseModel],
    choices: Mapping[str, Sequence[str]] | None = None,
    *,
    key: str,
    only: Sequence[str] | None = None,
) -> dict[str, Any]:
    """One widget per field of `model` (or of the fields in `only`); returns the raw values
    (the runner validates them).

    A str field listed in `choices` becomes a selectbox of those values (a text box when
    there are more than MAX_CHOICES). Widget keys are `{key}_{field}`, so tests can set them.
    """
    values: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if only is not None and name not in only:
            continue
        options = widget_options(choices, name)
        listed = (choices or {}).get(name)
        if options is None and listed:  # too many to offer (a list gone has none to count)
            field = _with_hint(field, f"{len(listed):,} values: type one")
        values[name] = _field_widget(name, field, options, key=f"{key}_{name}")
    return values


def widget_options(choices: Mapping[str, Sequence[str]] | None, name: str) -> Sequence[str] | None:
    """The values field `name`'s selectbox offers, or None when it is not one (no choices,
    more than MAX_CHOICES of them, or a stored list that went while it was read: then it is
    a text box)."""
    options = (choices or {}).get(name)
    if options is None or len(options) > MAX_CHOICES:
        return None
    values = list(options)  # a list kept beside a stored result is read here
    return None if getattr(options, "lost", False) else values


def widget_value(field: FieldInfo, options: Sequence[str] | None, text: str) -> Any:
    """The value the field's widget holds for `text` (as `value_text` wrote it), checked by the
    rules the widget enforces (allowed choices, bounds, length, control characters);
    ValueError saying why when the widget could not hold it."""
    kind, optional = _unwrap(field.annotation)
    if options is not None or typing.get_origin(kind) is typing.Literal or _is_enum(kind):
        listed = _choices(kind, options, optional)
        found = [value for value in listed if value_text(value) == text]
        if not found:
            raise ValueError(f"not one of the {len(listed):,} values offered")
        return found[0]
    if kind is bool:
        if text not in ("true", "false"):
            raise ValueError("neither true nor false")
        return text == "true"
    if kind in (int, float):
        return _number_value(field, kind, text)
    default = field.get_default(call_default_factory=True)
    limit = max(_max_length(field) or MAX_TEXT_CHARS, len("" if default is None else str(default)))
    problem = text_problem(text, limit)
    if problem:
        raise ValueError(problem)
    return text


def _number_value(field: FieldInfo, kind: Any, text: str) -> Any:
    low, high = _bounds(field, whole=kind is int)
    limit = INT_LIMIT if kind is int else FLOAT_LIMIT
    low = -limit if low is None else low
    high = limit if high is None else high
    try:
        number = int(text) if kind is int else float(text)
    except ValueError:
        raise ValueError("not a whole number" if kind is int else "not a number") from None
    if not math.isfinite(number) or not low <= number <= high:
        raise ValueError(f"not a number from {low:,} to {high:,}")
    return number


def value_text(value: Any) -> str:
    """A widget's value as query text: `true`/`false`, numbers as Python writes them, an enum
    by its value, None as the empty text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return value_text(value.value)
    return str(value)


def _with_hint(field: FieldInfo, hint: str) -> FieldInfo:
    merged = FieldInfo.merge_field_infos(field)
    merged.description = f"{field.description} ({hint})" if field.description else hint
    return merged


def _field_widget(name: str, field: FieldInfo, options: Sequence[str] | None, *, key: str) -> Any:
    label = field.title or name.replace("_", " ")
    hint = field.description
    kind, optional = _unwrap(field.annotation)
    default = field.get_default(call_default_factory=True)
    if options is not None or typing.get_origin(kind) is typing.Literal or _is_enum(kind):
        return _choice_widget(label, hint, kind, default, options, optional, key=key)
    if kind is bool:
        return st.checkbox(label, value=bool(default), help=hint, key=key)
    if kind in (int, float):
        return _number_widget(label, hint, kind, field, default, key=key)
    start = "" if default is None else str(default)
    limit = max(_max_length(field) or MAX_TEXT_CHARS, len(start))
    text = st.text_input(label, value=start, max_chars=limit, help=hint, key=key)
    problem = text_problem(text, limit)
    if problem:
        st.error(f"{label}: {problem}; the default ({start!r}) is used instead.")
        text = start
    return None if optional and text == "" else text


def _number_widget(
    label: str, hint: str | None, kind: Any, field: FieldInfo, default: Any, *, key: str
) -> Any:
    """A number box bounded by the field's rules (or ±INT_LIMIT, ±FLOAT_LIMIT without any);
    the bounds are in its help."""
    low, high = _bounds(field, whole=kind is int)
    cast = int if kind is int else float
    limit = INT_LIMIT if kind is int else FLOAT_LIMIT
    low = cast(-limit if low is None else low)
    high = cast(limit if high is None else high)
    value = cast(default) if default is not None else low
    bounds = f"from {low:,} to {high:,}"
    number = st.number_input(
        label,
        min_value=low,
        max_value=high,
        value=value,
        step=1 if kind is int else None,
        help=f"{hint} ({bounds})" if hint else bounds.capitalize(),
        key=key,
    )
    if number is None or not math.isfinite(number) or not low <= number <= high:
        st.error(f"{label}: a number {bounds}; the default ({value:,}) is used instead.")
        return value
    return number


def text_problem(text: str, limit: int) -> str:
    """Why typed text is refused (too long, control characters, not Unicode), or ''."""
    if len(text) > limit:
        return f"at most {limit:,} characters, got {len(text):,}"
    for char in text:
        category = unicodedata.category(char)
        if category == "Cc":
            return f"control characters are not accepted (found U+{ord(char):04X})"
        if category == "Cs":
            return "not valid Unicode text (a lone surrogate)"
    return ""


def _max_length(field: FieldInfo) -> int | None:
    for item in field.metadata:
        if isinstance(item, annotated_types.MaxLen):
            return int(item.max_length)
    return None


def _choice_widget(
    label: str,
    hint: str | None,
    kind: Any,
    default: Any,
    options: Sequence[str] | None,
    optional: bool,
    *,
    key: str,
) -> Any:
    if options is None and isinstance(default, enum.Enum):
        default = default.value
    listed = _choices(kind, options, optional)
    index = listed.index(default) if default in listed else 0
    if not listed:
        st.caption(f"{label}: nothing to choose from yet")
        return default
    return st.selectbox(
        label,
        listed,
        index=index,
        format_func=lambda v: "(all)" if v is None or v == "" else str(v),
        help=hint,
        key=key,
    )


def _choices(kind: Any, options: Sequence[str] | None, optional: bool) -> list[Any]:
    """What a choice widget lists: `options`, else the Literal's or the enum's values; None
    first for an optional field."""
    if options is None:
        options = [m.value for m in kind] if _is_enum(kind) else list(typing.get_args(kind))
    return ([None] if optional else []) + list(options)


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(inner type, optional?) for `X | None`; other annotations unchanged."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def _is_enum(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, enum.Enum)


def _bounds(field: FieldInfo, *, whole: bool = True) -> tuple[float | None, float | None]:
    """The field's range; a strict bound of a whole-number field moves in by one, that of a
    float field stays (the model refuses the bound itself: `gt=0` on seconds takes 0.5)."""
    step = 1 if whole else 0
    low: float | None = None
    high: float | None = None
    for item in field.metadata:
        if isinstance(item, annotated_types.Ge):
            low = item.ge  # type: ignore[assignment]
        elif isinstance(item, annotated_types.Gt):
            low = item.gt + step  # type: ignore[operator]
        elif isinstance(item, annotated_types.Le):
            high = item.le  # type: ignore[assignment]
        elif isinstance(item, annotated_types.Lt):
            high = item.lt - step  # type: ignore[operator]
    return low, high
