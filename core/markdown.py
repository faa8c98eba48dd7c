"""Text from outside (a name a cluster chose, an error message) as Markdown that the dashboard
shows as exactly that text, on one line: never a link, an image, HTML, LaTeX, a colour, an
emoji, an icon or a heading.

Streamlit renders every title, label, caption and note as Markdown, so a subscription named
`![b](http://host/b.png)` would make the viewer's browser fetch that image. `escape_markdown`
is the one way such text enters a Markdown string; `pulsar_lens.api` exports it to plugins.
"""

from __future__ import annotations

import re

from pulsar_lens.core.secrets import escape_controls

WORD_JOINER = "\u2060"
"""Invisible and unbreakable: put inside a pattern Streamlit rewrites, it stops the rewrite
without changing what the reader sees."""

_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
# CommonMark takes a backslash before any ASCII punctuation as that character, literally.
_LEADING_SPACES = re.compile(r"^ +")
# Four leading spaces would start a code block; a character reference is a space but no indent.
_REWRITTEN = re.compile(
    r"(?i)https?(?=://)"  # GFM autolinks: http://..., https://...
    r"|www(?=\.)"  # www.example.com
    r"|@(?=[-\w])"  # user@example.com
    r"|:(?=[\w+-]+:)"  # :fire: emoji, :streamlit: the logo
    r"|(?<!\S)[-<>~](?=(?:->|-|>|=)(?!\S))"  # ` -> `, ` -- `, ` >= `: arrows, dashes, signs
)
# Patterns Streamlit rewrites in the text after parsing, where backslashes no longer count.


def escape_markdown(text: object) -> str:
    """`text` as Markdown that shows exactly `str(text)`, control characters as visible escapes
    (`\\n`, `\\x1b`) so it stays one line.

    Every ASCII punctuation character gets a backslash; the patterns Streamlit rewrites after
    parsing (web and e-mail addresses, `:shortcodes:`, ` -> ` arrows) get an invisible
    WORD_JOINER inside them.
    """
    line = escape_controls(str(text))
    joined = _REWRITTEN.sub(lambda match: match.group(0) + WORD_JOINER, line)
    escaped = _PUNCTUATION.sub(r"\\\1", joined)
    return _LEADING_SPACES.sub(lambda match: "&#32;" * len(match.group(0)), escaped)
