"""Text the app shows inside Markdown: one escaper, imported by the render layer and the backend alike
(it lived in render, which imports the backend, so the backend could reach it only by a hidden circle)."""

from __future__ import annotations

import re

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$&:])")


def plain(text: str) -> str:
    """``text`` with every Markdown-special character backslash-escaped, for alerts that render Markdown.

    ``st.error`` and friends have no plain-text mode; escaping keeps a file name such as
    ``![x](http://...)`` from a submitted zip from rendering as an image or link.
    """
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)
