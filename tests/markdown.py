"""What a reader sees of the Markdown the dashboard sends to Streamlit, for tests that look
for a name or a message in it (`pulsar_lens.core.markdown.escape_markdown` escapes what comes from
outside)."""

from __future__ import annotations

import re

from pulsar_lens.core.markdown import WORD_JOINER

PUNCTUATION = r"[!-/:-@\[-`{-~]"
_ESCAPED = re.compile(rf"\\({PUNCTUATION})")
_RAW_PUNCTUATION = re.compile(PUNCTUATION)
_REWRITTEN = re.compile(
    r"(?i)https?://|www\.|@[-\w]|:[\w+-]+:|(?<!\S)(?:<->|->|<-|--|>=|<=|~=)(?!\S)"
)


def shown(markdown: str) -> str:
    """The text a reader sees where `markdown` holds escaped text: backslash escapes read,
    the invisible word joiners and the leading-space references gone."""
    text = _ESCAPED.sub(r"\1", markdown.replace("&#32;", " "))
    return text.replace(WORD_JOINER, "")


def syntax_of(markdown: str) -> str:
    """`markdown` with each backslash escape blanked out to NUL: what is left of a name in it
    is what Streamlit would take as Markdown syntax."""
    return _ESCAPED.sub("\x00", markdown)


def escaped_text_problem(markdown: str) -> str:
    """Why `markdown` is not plain text to Streamlit's Markdown, or '' when it is: every ASCII
    punctuation character escaped, one line, and none of the patterns Streamlit rewrites
    after parsing (links, `:shortcodes:`, arrows) left whole."""
    body = re.sub(r"^(&#32;)+", "", markdown)
    bare = _ESCAPED.sub("", body)
    if _RAW_PUNCTUATION.search(bare):
        return f"unescaped punctuation in {markdown!r}"
    if re.search(r"[\x00-\x1f\x7f\u2028\u2029]", markdown):
        return f"a control character or line break in {markdown!r}"
    found = _REWRITTEN.search(_ESCAPED.sub(r"\1", body))
    return f"{found.group(0)!r} would be rewritten in {markdown!r}" if found else ""
