"""The lag plot: series of (time, lag) points drawn as an inline SVG line chart, server-side
(no JavaScript, no chart library). Labels are escaped like any page text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydmq.console.html import Markup, text

__all__ = ["line_chart"]

WIDTH, HEIGHT = 640, 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 150, 12, 28
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2")
_MAX_SERIES = len(_COLOURS)


def _nice_top(value: float) -> float:
    """The y axis's top: 1, 2 or 5 times a power of ten, at least ``value``."""
    if value <= 0:
        return 1.0
    scale = 1.0
    while scale * 10 <= value:
        scale *= 10
    for step in (1, 2, 5, 10):
        if step * scale >= value:
            return step * scale
    return 10 * scale


def line_chart(
    series: Mapping[str, Sequence[tuple[float, float]]], now: float, span_s: float, css_id: str
) -> Markup:
    """One line per series (name -> (at, value) points, ``at`` in the clock of ``now``) over
    the last ``span_s`` seconds; at most a few series, the largest by last value."""
    plot_w = WIDTH - _LEFT - _RIGHT
    plot_h = HEIGHT - _TOP - _BOTTOM
    shown = sorted(series.items(), key=lambda kv: (-(kv[1][-1][1] if kv[1] else 0), kv[0]))
    shown = shown[:_MAX_SERIES]
    top = _nice_top(max((v for _, points in shown for _, v in points), default=0))

    def x(at: float) -> float:
        return _LEFT + plot_w * min(1.0, max(0.0, 1 - (now - at) / span_s))

    def y(value: float) -> float:
        return _TOP + plot_h * (1 - value / top)

    parts = [
        f'<svg id="{text(css_id)}" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img">',
        f"<title>{text('consumer lag over the last ' + _span(span_s))}</title>",
    ]
    for fraction in (0.0, 0.5, 1.0):
        gy = y(top * fraction)
        parts.append(
            f'<line x1="{_LEFT}" y1="{gy:.1f}" x2="{_LEFT + plot_w}" y2="{gy:.1f}" '
            'stroke="#d5dbe3"/>'
            f'<text x="{_LEFT - 6}" y="{gy + 4:.1f}" text-anchor="end" font-size="11">'
            f"{text(int(top * fraction))}</text>"
        )
    base = _TOP + plot_h
    parts.append(
        f'<text x="{_LEFT}" y="{base + 18}" font-size="11">-{text(_span(span_s))}</text>'
        f'<text x="{_LEFT + plot_w}" y="{base + 18}" font-size="11" text-anchor="end">now</text>'
    )
    for index, (name, points) in enumerate(shown):
        colour = _COLOURS[index]
        visible = [(at, v) for at, v in points if now - at <= span_s]
        if visible:
            coordinates = " ".join(f"{x(at):.1f},{y(v):.1f}" for at, v in visible)
            parts.append(
                f'<polyline class="series" points="{coordinates}" fill="none" '
                f'stroke="{colour}" stroke-width="2"/>'
            )
        ly = _TOP + 14 + 16 * index
        parts.append(
            f'<rect x="{WIDTH - _RIGHT + 10}" y="{ly - 9}" width="10" height="10" '
            f'fill="{colour}"/><text x="{WIDTH - _RIGHT + 24}" y="{ly}" font-size="11">'
            f"{text(name)}</text>"
        )
    if not shown:
        parts.append(
            f'<text x="{_LEFT + plot_w / 2:.0f}" y="{_TOP + plot_h / 2:.0f}" '
            'text-anchor="middle" font-size="12" fill="#7a8694">no samples yet</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _span(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"
