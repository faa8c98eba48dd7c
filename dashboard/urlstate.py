"""A page's controls in its URL: `?subscription=...&key=...` opens the view it names.

Before a plugin's params form is drawn, `restore` gives each widget the value of the query
parameter named like its field (when the URL brings a new one: a pasted link, a reload; and
the page's last view when the visitor comes back to it without a query), checked by the
rules that widget enforces (`forms.widget_value`); a value it refuses is left out and said
once, as plain text. After the form, `record` writes every value that differs from the
field's default into the query and drops the others, so the address bar always says the
view on screen.

The query's other names belong to others: `cluster` (the sidebar's choice, `status.py`), `at`
(the snapshot shown), and Streamlit's own `embed` options; a field of one of those names is
not kept in the URL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import streamlit as st
from pydantic import BaseModel, ValidationError

from pulsar_lens.core.markdown import escape_markdown
from pulsar_lens.dashboard.forms import value_text, widget_options, widget_value

RESERVED = frozenset({"cluster", "at", "embed", "embed_options"})
"""Query names that are not a page's controls."""

SHOWN_CHARS = 100
"""The most of a refused value a warning repeats."""


def _seen_key(key: str) -> str:
    return f"{key}__url"  # never a widget's: a field name does not start with _


def synced_fields(model: type[BaseModel]) -> list[str]:
    """The fields of `model` kept in the URL: all but the RESERVED names."""
    return [name for name in model.model_fields if name not in RESERVED]


def restore(
    model: type[BaseModel], choices: Mapping[str, Sequence[str]] | None, *, key: str
) -> None:
    """Give the widgets of `params_form(model, choices, key=key)` the values the URL names;
    call before the form is drawn.

    A widget takes the URL's value when it has none yet (a link, a reload) or when the URL
    names another value than this page last wrote (the address changed under it). A URL
    without any of the page's names, in a session that showed the page with some, gets them
    back: Streamlit's page links and the back button drop the query.
    """
    seen: dict[str, str] = st.session_state.get(_seen_key(key), {})
    names = synced_fields(model)
    wanted = {name: st.query_params[name] for name in names if name in st.query_params}
    if not wanted and seen:
        wanted = dict(seen)
    refused: list[str] = []
    for name in names:
        text = wanted.get(name)
        widget = f"{key}_{name}"
        if text is None:
            if name in seen:  # the URL dropped it: the default again
                st.session_state.pop(widget, None)
            continue
        if widget in st.session_state and seen.get(name) == text:
            continue  # the widget holds the visitor's latest choice
        try:
            st.session_state[widget] = checked_value(model, name, choices, text)
        except ValueError as exc:
            shown = text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"
            refused.append(f"{name}={shown!r} ({exc})")
    if refused:
        st.warning(
            escape_markdown(
                "The link's " + "; ".join(refused) + " cannot be shown; the defaults are used."
            )
        )


def checked_value(
    model: type[BaseModel], name: str, choices: Mapping[str, Sequence[str]] | None, text: str
) -> Any:
    """The widget value of field `name` for query `text`, or ValueError: the widget's rules
    (`forms.widget_value`), then the model's own for the field."""
    value = widget_value(model.model_fields[name], widget_options(choices, name), text)
    try:
        model.model_validate({name: value})
    except ValidationError as exc:
        errors = [e for e in exc.errors() if e["loc"][:1] == (name,)]
        if errors:
            raise ValueError(errors[0]["msg"]) from None
    return value


def record(model: type[BaseModel], values: Mapping[str, Any], *, key: str) -> None:
    """Write `values` (what the form returned) into the query: a value other than its field's
    default under the field's name, a default one removed."""
    seen: dict[str, str] = {}
    for name in synced_fields(model):
        if name not in values:
            continue
        default = model.model_fields[name].get_default(call_default_factory=True)
        text = value_text(values[name])
        if values[name] == default or text == value_text(default):
            if name in st.query_params:
                del st.query_params[name]
            continue
        if st.query_params.get(name) != text:
            st.query_params[name] = text
        seen[name] = text
    st.session_state[_seen_key(key)] = seen
