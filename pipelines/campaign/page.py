"""The campaign's page: one self-contained HTML file (inline CSS and SVG, no external
asset, no script) with the funnel, the responses over time and what each round of
reminders brought. Pure: the figures come from ``funnel``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape

from .funnel import Funnel, Round

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:60rem;color:#1d2330;
padding:0 1rem}h1{font-size:1.6rem;margin:0 0 .2rem}h2{font-size:1.15rem;margin:2rem 0 .6rem}
.sub{color:#5b6475}.kpis{display:flex;gap:1rem;flex-wrap:wrap;margin:1.2rem 0}
.kpi{background:#f2f5fa;border-radius:8px;padding:.7rem 1rem;min-width:8rem}
.kpi b{display:block;font-size:1.5rem}table{border-collapse:collapse;width:100%}
td,th{text-align:left;padding:.35rem .6rem;border-bottom:1px solid #e3e7ee}th{font-weight:600}
td.n{text-align:right;font-variant-numeric:tabular-nums}svg text{font:12px system-ui,sans-serif;fill:#1d2330}
"""
_BAR_COLOURS = ("#3d6fd9", "#4f86e8", "#62a0f0", "#78b6f4", "#2e9e6b")


def _time(ms: int | None) -> str:
    return "-" if not ms else datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def _funnel_svg(f: Funnel) -> str:
    steps = [("sent", f.sent), ("delivered", f.delivered), ("opened", f.opened), ("started", f.started),
             ("completed", f.completed)]
    width, top = 600, max(f.sent, 1)
    bars = []
    for i, ((name, n), colour) in enumerate(zip(steps, _BAR_COLOURS, strict=True)):
        w = max(2, round(440 * n / top))
        y = i * 34
        bars.append(f'<text x="0" y="{y + 20}">{name}</text>'
                    f'<rect x="90" y="{y + 4}" width="{w}" height="24" rx="3" fill="{colour}"/>'
                    f'<text x="{96 + w}" y="{y + 21}">{n:,}</text>')
    return (f'<svg role="img" aria-label="funnel" width="{width}" height="{len(steps) * 34}" '
            f'viewBox="0 0 {width} {len(steps) * 34}">{"".join(bars)}</svg>')


def _timeline_svg(points: Sequence[tuple[int, int]], rounds: Sequence[Round], total: int) -> str:
    width, height, left, bottom = 600, 220, 40, 190
    if not points:
        return '<p class="sub">No responses yet.</p>'
    start = min([points[0][0], *(r.at for r in rounds if r.at)])
    end = max(points[-1][0], *(r.at for r in rounds)) or start + 1
    span, top = max(end - start, 1), max(total, points[-1][1], 1)

    def x(at: int) -> float:
        return left + (width - left - 20) * (at - start) / span

    def y(n: int) -> float:
        return bottom - (bottom - 20) * n / top

    path = [f"{x(start):.1f},{y(0):.1f}"]
    for at, n in points:
        path += [f"{x(at):.1f},{y(n - 1):.1f}", f"{x(at):.1f},{y(n):.1f}"]
    path.append(f"{x(end):.1f},{y(points[-1][1]):.1f}")
    def label(at: int) -> str:  # beside its line, on the side with room
        return (f'x="{x(at) + 3:.1f}"' if x(at) < width * 0.7 else f'x="{x(at) - 3:.1f}" text-anchor="end"')

    marks = "".join(f'<line x1="{x(r.at):.1f}" x2="{x(r.at):.1f}" y1="20" y2="{bottom}" stroke="#d9822b" '
                    f'stroke-dasharray="4 3"/><text {label(r.at)} y="14">{escape(r.name)}</text>'
                    for r in rounds if r.name != "invitations")
    return (f'<svg role="img" aria-label="responses over time" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}"><line x1="{left}" x2="{width - 20}" y1="{bottom}" y2="{bottom}" '
            f'stroke="#8a93a5"/><text x="0" y="{y(top) + 4:.1f}">{top:,}</text><text x="0" y="{bottom}">0</text>'
            f'{marks}<polyline fill="none" stroke="#2e9e6b" stroke-width="2.5" points="{" ".join(path)}"/>'
            f'<text x="{left}" y="{height - 6}">{_time(start)}</text>'
            f'<text x="{width - 20}" y="{height - 6}" text-anchor="end">{_time(end)}</text></svg>')


def campaign_page(f: Funnel, form_id: str, rounds: Sequence[Round], points: Sequence[tuple[int, int]],
                  generated_at: int) -> str:
    """The campaign's HTML page (UTF-8 text): ``f`` its funnel, ``rounds`` what each
    round brought, ``points`` the completions over time (``cumulative_completions``)."""
    median = "-" if f.median_answer_seconds is None else _duration(f.median_answer_seconds)
    kpis = [("sent", f"{f.sent:,}"), ("completed", f"{f.completed:,}"), ("response rate", f"{f.response_rate:.0%}"),
            ("median time to answer", median), ("pending", f"{f.pending:,}"), ("bounced", f"{f.bounced:,}")]
    status = [("rows", f.rows), ("sent", f.sent), ("delivered", f.delivered), ("bounced", f.bounced),
              ("failed", f.failed), ("not emailed", f.not_emailed), ("opened", f.opened), ("started", f.started),
              ("completed", f.completed), ("pending", f.pending), ("expired", f.expired), ("canceled", f.canceled),
              ("reminders sent", f.reminders_sent)]
    round_rows = "".join(f"<tr><td>{escape(r.name)}</td><td>{_time(r.at)}</td><td class=n>{r.reminded:,}</td>"
                         f"<td class=n>{r.completed_after:,}</td></tr>" for r in rounds)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Campaign {escape(f.job)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head><body>'
            f'<h1>Campaign {escape(f.job)}</h1><p class="sub">form {escape(form_id)} · as of {_time(generated_at)} UTC'
            f'</p><div class="kpis">'
            + "".join(f'<div class="kpi"><b>{v}</b>{k}</div>' for k, v in kpis)
            + f'</div><h2>Funnel</h2>{_funnel_svg(f)}<h2>Responses over time</h2>'
            f'{_timeline_svg(points, rounds, f.sent)}<h2>What each round brought</h2><table><thead><tr><th>round</th>'
            f'<th>at (UTC)</th><th>reminded</th><th>completed after it</th></tr></thead><tbody>{round_rows}'
            f'</tbody></table><h2>Every count</h2><table><tbody>'
            + "".join(f"<tr><td>{k}</td><td class=n>{v:,}</td></tr>" for k, v in status)
            + "</tbody></table></body></html>\n")


def _duration(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
