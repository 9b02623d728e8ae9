"""The campaign's page: one self-contained HTML file (inline CSS and SVG, no external
asset, no script) with whether the campaign is open or closed, its sheet rows in every
state, the funnel, the responses over time and what each round of reminders brought.
Pure: the figures come from ``funnel`` and the run's ``RunCounts``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape

from ..outreach.counts import RunCounts, row_states
from .funnel import Closed, Funnel, Round

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:60rem;color:#1d2330;
padding:0 1rem}h1{font-size:1.6rem;margin:0 0 .2rem}h2{font-size:1.15rem;margin:2rem 0 .6rem}
.sub{color:#5b6475}.kpis{display:flex;gap:1rem;flex-wrap:wrap;margin:1.2rem 0}
.kpi{background:#f2f5fa;border-radius:8px;padding:.7rem 1rem;min-width:8rem}
.kpi b{display:block;font-size:1.5rem}table{border-collapse:collapse;width:100%}
td,th{text-align:left;padding:.35rem .6rem;border-bottom:1px solid #e3e7ee}th{font-weight:600}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}svg text{font:12px system-ui,sans-serif;fill:#1d2330}
svg text.axis{font-weight:600}table.rows{width:auto;min-width:24rem}tfoot th{border-top:2px solid #c9cfda}
.state{display:inline-block;border-radius:6px;padding:.45rem .8rem;margin:.8rem 0 0}
.state.open{background:#e3f4ec;color:#1f6b49}.state.closed{background:#eceef2;color:#3a4150}
"""
_BAR_COLOURS = ("#3d6fd9", "#4f86e8", "#62a0f0", "#78b6f4", "#2e9e6b")


def _time(ms: int | None) -> str:
    return "-" if not ms else datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def _funnel_svg(f: Funnel) -> str:
    steps = [("requests", f.requests), ("delivered", f.delivered), ("opened", f.opened), ("started", f.started),
             ("completed", f.completed)]
    width, top = 600, max(f.requests, 1)
    bars = []
    for i, ((name, n), colour) in enumerate(zip(steps, _BAR_COLOURS, strict=True)):
        w = max(2, round(440 * n / top))
        y = i * 34
        bars.append(f'<text x="0" y="{y + 20}">{name}</text>'
                    f'<rect x="90" y="{y + 4}" width="{w}" height="24" rx="3" fill="{colour}"/>'
                    f'<text x="{96 + w}" y="{y + 21}">{n:,}</text>')
    return (f'<svg role="img" aria-label="funnel" width="{width}" height="{len(steps) * 34}" '
            f'viewBox="0 0 {width} {len(steps) * 34}">{"".join(bars)}</svg>')


_PLOT = {"width": 640, "height": 270, "left": 64, "right": 24, "top": 44, "bottom": 222}
_LINE, _ROUND, _SENT = "#2e9e6b", "#d9822b", "#8a93a5"


def _legend(sent: int) -> str:
    """The chart's legend, one entry per mark drawn, above the plot."""
    items = [(f'<line x1="0" x2="22" y1="0" y2="0" stroke="{_LINE}" stroke-width="2.5"/>', "completed responses"),
             (f'<line x1="0" x2="22" y1="0" y2="0" stroke="{_SENT}" stroke-dasharray="2 3"/>',
              f"requests sent ({sent:,})"),
             (f'<line x1="0" x2="22" y1="0" y2="0" stroke="{_ROUND}" stroke-dasharray="4 3"/>', "reminder round")]
    out, x = [], _PLOT["left"]
    for mark, text in items:
        out.append(f'<g transform="translate({x},12)">{mark}<text x="28" y="4">{escape(text)}</text></g>')
        x += 42 + 7 * len(text)
    return f'<g class="legend">{"".join(out)}</g>'


def _timeline_svg(points: Sequence[tuple[int, int]], rounds: Sequence[Round], total: int, until: int) -> str:
    """Completed responses over time (a step line) up to ``until`` (the later of the
    close and the page's "as of"), the requests sent as a dotted level, each reminder
    round as a dashed mark; both axes labelled, one legend."""
    if not points:
        return '<p class="sub">No responses yet.</p>'
    width, height, left, right, top_px, bottom = (_PLOT[k] for k in ("width", "height", "left", "right", "top",
                                                                     "bottom"))
    start = min([points[0][0], *(r.at for r in rounds if r.at)])
    end = max(points[-1][0], until, *(r.at for r in rounds)) or start + 1
    span, top = max(end - start, 1), max(total, points[-1][1], 1)

    def x(at: int) -> float:
        return left + (width - left - right) * (at - start) / span

    def y(n: float) -> float:
        return bottom - (bottom - top_px) * n / top

    path = [f"{x(start):.1f},{y(0):.1f}"]
    for at, n in points:
        path += [f"{x(at):.1f},{y(n - 1):.1f}", f"{x(at):.1f},{y(n):.1f}"]
    path.append(f"{x(end):.1f},{y(points[-1][1]):.1f}")

    def label(at: int) -> str:  # beside its line, on the side with room
        return f'x="{x(at) + 3:.1f}"' if x(at) < width * 0.7 else f'x="{x(at) - 3:.1f}" text-anchor="end"'

    ticks = sorted({0, top // 2, top}) if top > 1 else [0, top]
    y_axis = "".join(f'<line x1="{left - 4}" x2="{width - right}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#e3e7ee"/>'
                     f'<text x="{left - 8}" y="{y(t) + 4:.1f}" text-anchor="end">{t:,}</text>' for t in ticks)
    marks = "".join(f'<line x1="{x(r.at):.1f}" x2="{x(r.at):.1f}" y1="{top_px}" y2="{bottom}" stroke="{_ROUND}" '
                    f'stroke-dasharray="4 3"/><text {label(r.at)} y="{top_px + 12}">{escape(r.name)}</text>'
                    for r in rounds if r.name != "invitations")
    mid = (top_px + bottom) / 2
    return (f'<svg role="img" aria-label="completed responses over time" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">{_legend(total)}{y_axis}'
            f'<line x1="{left}" x2="{left}" y1="{top_px}" y2="{bottom}" stroke="{_SENT}"/>'
            f'<line x1="{left}" x2="{width - right}" y1="{bottom}" y2="{bottom}" stroke="{_SENT}"/>'
            f'<line x1="{left}" x2="{width - right}" y1="{y(total):.1f}" y2="{y(total):.1f}" stroke="{_SENT}" '
            f'stroke-dasharray="2 3"/>{marks}'
            f'<polyline fill="none" stroke="{_LINE}" stroke-width="2.5" points="{" ".join(path)}"/>'
            f'<text class="axis" x="14" y="{mid:.0f}" text-anchor="middle" transform="rotate(-90 14 {mid:.0f})">'
            f'responses</text>'
            f'<text x="{left}" y="{bottom + 18}">{_time(start)}</text>'
            f'<text x="{width - right}" y="{bottom + 18}" text-anchor="end">{_time(end)}</text>'
            f'<text class="axis" x="{(left + width - right) / 2:.0f}" y="{height - 6}" text-anchor="middle">'
            f'time (UTC)</text></svg>')


def _state(closed: Closed | None) -> str:
    if closed is None:
        return '<p class="state open"><b>Open</b>: pending requests can still be answered and reminded.</p>'
    why = f": {escape(closed.reason)}" if closed.reason else " (no reason given)"
    return (f'<p class="state closed"><b>Closed</b> {_time(closed.at)} UTC{why}; its pending requests were '
            f'canceled.</p>')


def _form(form_id: str, form_name: str | None) -> str:
    return f"form {escape(form_name)} ({escape(form_id)})" if form_name else f"form {escape(form_id)}"


def _sheet_rows(counts: RunCounts | None) -> str:
    """Every row state of the job's last run, each with its count (a new state shows too)."""
    if counts is None:
        return '<p class="sub">No run of this job has recorded its rows yet.</p>'
    cells = "".join(f"<tr><td>{escape(words)}</td><td class=n>{n:,}</td></tr>" for words, n in row_states(counts))
    return (f'<table class="rows"><tbody>{cells}</tbody><tfoot><tr><th>sheet rows</th><th class=n>{counts.rows:,}'
            f'</th></tr></tfoot></table>')


def campaign_page(f: Funnel, form_id: str, rounds: Sequence[Round], points: Sequence[tuple[int, int]],
                  generated_at: int, *, form_name: str | None = None, closed: Closed | None = None,
                  counts: RunCounts | None = None) -> str:
    """The campaign's HTML page (UTF-8 text): ``f`` its funnel, ``rounds`` what each
    round brought, ``points`` the completions over time (``cumulative_completions``);
    the form by ``form_name`` (and id), whether and why it is ``closed``, and its sheet
    rows in every state of ``counts`` (the last run's)."""
    median = "-" if f.median_answer_seconds is None else _duration(f.median_answer_seconds)
    until = max(generated_at, closed.at if closed else 0)  # the chart runs to the close, or to "as of"
    kpis = [("requests sent", f"{f.requests:,}"), ("completed", f"{f.completed:,}"),
            ("response rate", f"{f.response_rate:.0%}"),
            ("median time to answer", median), ("pending", f"{f.pending:,}"), ("bounced", f"{f.bounced:,}")]
    status = [("sheet rows sent", f.sent), ("changed since sent", f.changed), ("requests", f.requests),
              ("delivered", f.delivered), ("bounced", f.bounced),
              ("failed", f.failed), ("not emailed", f.not_emailed), ("opened", f.opened), ("started", f.started),
              ("completed", f.completed), ("pending", f.pending), ("expired", f.expired), ("canceled", f.canceled),
              ("reminders sent", f.reminders_sent)]
    round_rows = "".join(f"<tr><td>{escape(r.name)}</td><td>{_time(r.at)}</td><td class=n>{r.reminded:,}</td>"
                         f"<td class=n>{r.completed_after:,}</td></tr>" for r in rounds)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Campaign {escape(f.job)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head><body>'
            f'<h1>Campaign {escape(f.job)}</h1><p class="sub">{_form(form_id, form_name)} · as of '
            f'{_time(generated_at)} UTC</p>{_state(closed)}<div class="kpis">'
            + "".join(f'<div class="kpi"><b>{v}</b>{k}</div>' for k, v in kpis)
            + f'</div><h2>Sheet rows</h2>{_sheet_rows(counts)}<h2>Funnel</h2>{_funnel_svg(f)}'
            f'<h2>Responses over time</h2>{_timeline_svg(points, rounds, f.requests, until)}'
            f'<h2>What each round brought</h2>'
            f'<table class="rounds"><thead><tr><th>round</th><th>at (UTC)</th><th>reminded</th>'
            f'<th>completed after it</th></tr></thead><tbody>{round_rows}</tbody></table><h2>Every count</h2>'
            f'<table class="counts"><tbody>'
            + "".join(f"<tr><td>{k}</td><td class=n>{v:,}</td></tr>" for k, v in status)
            + "</tbody></table></body></html>\n")


def _duration(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
