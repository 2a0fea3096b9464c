"""HTML building blocks of the console: escaping, links, tables and the page layout.

Every text that reaches a page goes through :func:`text` (``html.escape`` with quotes), so a
topic or group name (user input) is shown, never interpreted. :class:`Markup` marks HTML this
module built itself, which the table and layout helpers pass through unescaped.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from urllib.parse import quote

from pydmq.http.messages import HttpResponse

__all__ = ["HTML_TYPE", "Cell", "Markup", "facts", "link", "page", "table", "text"]

HTML_TYPE = "text/html; charset=utf-8"
REFRESH_S = 10


class Markup(str):
    """HTML built by this module (already escaped). Adding text to it escapes the text."""

    __slots__ = ()

    def __add__(self, other: str) -> Markup:
        return Markup(str.__add__(self, text(other)))


Cell = Markup | str | int | float | None


def text(value: Cell) -> Markup:
    """``value`` as escaped HTML (None as a dash)."""
    if isinstance(value, Markup):
        return value
    if value is None:
        return Markup("&#8212;")
    if isinstance(value, float):
        value = f"{value:.1f}"
    return Markup(html.escape(str(value), quote=True))


def link(prefix: str, name: str, label: Cell = None) -> Markup:
    """A link to ``prefix/<name>`` (the name percent-encoded in the URL, escaped in HTML)."""
    href = f"{prefix}/{quote(name, safe='')}"
    return Markup(f'<a href="{text(href)}">{text(name if label is None else label)}</a>')


def table(headers: Sequence[str], rows: Iterable[Sequence[Cell]], css_id: str) -> Markup:
    """A table with a header row; an empty table says so."""
    head = "".join(f"<th>{text(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{text(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    if not body:
        body = f'<tr><td colspan="{len(headers)}" class="none">none</td></tr>'
    return Markup(
        f'<table id="{text(css_id)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def facts(pairs: Iterable[tuple[str, Cell]], css_id: str) -> Markup:
    """A definition list of name/value pairs."""
    items = "".join(f"<dt>{text(k)}</dt><dd>{text(v)}</dd>" for k, v in pairs)
    return Markup(f'<dl id="{text(css_id)}">{items}</dl>')


_STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#1d2733;background:#f5f7fa}
header{background:#1d2733;color:#fff;padding:.6em 1.2em;display:flex;gap:1.5em;align-items:baseline}
header a{color:#cfe3ff;text-decoration:none}header strong{font-size:1.15em}
main{padding:1em 1.5em}h1{font-size:1.4em;margin:.2em 0 .6em}h2{font-size:1.1em;margin-top:1.4em}
table{border-collapse:collapse;background:#fff;min-width:40%}
th,td{border:1px solid #d5dbe3;padding:.3em .7em;text-align:left}th{background:#e9eef4}
td.none{color:#7a8694;font-style:italic}
dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dt{font-weight:600}dd{margin:0}
.note{color:#5b6775;font-size:.9em}svg{background:#fff;border:1px solid #d5dbe3}
"""


def page(title: str, body: Markup, status: int = 200) -> HttpResponse:
    """A whole page: the layout (navigation, a refresh every few seconds without JavaScript)
    around ``body``. Never cached: every figure is read when the page is asked for."""
    document = (
        "<!DOCTYPE html>"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="{REFRESH_S}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(title)} · pydmq console</title><style>{_STYLE}</style></head>"
        "<body><header><strong>pydmq console</strong><nav>"
        '<a href="/">Cluster</a> · <a href="/topics">Topics</a> · <a href="/groups">Groups</a>'
        "</nav></header>"
        f"<main><h1>{text(title)}</h1>{body}"
        '<p class="note">Read-only: this console changes nothing. Refreshes every '
        f"{REFRESH_S} s.</p></main></body></html>"
    )
    return HttpResponse(status, document.encode(), HTML_TYPE, [("cache-control", "no-store")])
