"""How the pages this package generates look, shared by the site's pages and the watch's: one style sheet, the
colours that tell series apart, and code spans written as HTML."""

from __future__ import annotations

import html
import re

PAGE_STYLE = """body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;font-size:13px;
margin-bottom:1em}th,td{border:1px solid #ccc;padding:3px 7px}td{text-align:right}td:first-child{text-align:left}
thead th{background:#f0f0f0}img{max-width:100%}"""


def palette() -> list[str]:
    """Colours for series that must tell apart; needs matplotlib."""
    # tab10 less its grey, which a reader could take for cuBLAS's black.
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    return [to_hex(colour) for index, colour in enumerate(colormaps["tab10"].colors) if index != 7]


def html_with_code(text: str) -> str:
    """Text with Markdown's inline `code` spans as HTML: escaped first, so that a span's content stays text."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))
