"""``--format html``: one self-contained HTML page (no network: it opens offline).

The page holds the findings (message, evidence with its tables, fix), a stacked bar of
the step-time breakdown for every step, the idle ledger (when the report has one),
kernel time by category and the top kernels (when the report has kernels), and for a
rank directory the step time of every rank. Plots are made with plotly (the ``html``
extra: ``pip install 'tracedoc[html]'``) and plotly.js is embedded once in the page, so
the file is about 5 MB and needs nothing else. Trace text (kernel names, paths, devices)
is escaped for where it goes (:mod:`tracedoc.render.escape`): :func:`~tracedoc.render.escape.html`
in the page, :func:`~tracedoc.render.escape.plotly` in the charts' labels, legends and hover
text (plotly draws its own ``<a href>``, ``<span style>`` and ``<br>`` tags).

Kernel time by category and the top kernels come from the report's ``kernels`` section (the
table signals ``kernel_time_by_category`` and ``top_kernels`` of :mod:`tracedoc.signals.gpu`):
the page is drawn from the document alone, never from the trace's frames.
"""

from __future__ import annotations

from typing import Any

from tracedoc.render.escape import html as _e
from tracedoc.render.escape import plotly as _p
from tracedoc.render.report import (
    BREAKDOWN,
    ORDER_NOTE,
    column_label,
    dedupe_vendor,
    device_label,
    fmt_evidence,
    plural,
    summary_line,
)

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1100px;
padding:1.5rem;color:#1f2328;background:#fff}
h1{font-size:1.4rem;margin-bottom:.2rem} h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #d0d7de}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9em}
.meta{color:#57606a} .summary{font-weight:600;font-size:1.05rem;margin:.8rem 0;padding:.6rem .8rem;
background:#f6f8fa;border-radius:6px}
.finding{border:1px solid #d0d7de;border-left-width:6px;border-radius:6px;padding:.6rem 1rem;margin:1rem 0}
.finding.error{border-left-color:#cf222e} .finding.warning{border-left-color:#bf8700}
.finding.info{border-left-color:#0969da}
.sev{font-weight:700;text-transform:uppercase;font-size:.8em;padding:.1rem .4rem;border-radius:4px;color:#fff}
.sev.error{background:#cf222e} .sev.warning{background:#9a6700} .sev.info{background:#0969da}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9em} th,td{border:1px solid #d0d7de;padding:.2rem .5rem;
text-align:left;vertical-align:top} td.num{text-align:right} .fix{background:#dafbe1;padding:.4rem .6rem;
border-radius:6px} .skipped{color:#57606a}
"""


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])
    head = "".join(f"<th>{_e(column_label(c))}</th>" for c in cols)
    body = []
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            num = isinstance(v, (int, float)) and not isinstance(v, bool)
            text = fmt_evidence(c, v) if num else ("" if v is None else str(v))
            cells.append(f'<td class="{"num" if num else "mono"}">{_e(text)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def findings_parts(report: Any) -> list[str]:
    """HTML fragments: the findings heading, one section per finding, the skipped rules."""
    out = [f'<h2>Findings</h2><p class="meta">{_e(plural(len(report.findings), "finding"))}, {_e(ORDER_NOTE)}.</p>']
    if not report.findings:
        out.append("<p>No findings.</p>")
    for i, f in enumerate(report.findings, 1):
        saving = "n/a" if f.estimated_saving_ms is None else f"~{f.estimated_saving_ms:.1f} ms/step"
        scalars = {k: v for k, v in f.evidence.items() if not isinstance(v, list)}
        parts = [
            f'<section class="finding {_e(f.severity)}" id="{_e(f.code)}">',
            f'<h3>#{i} <span class="sev {_e(f.severity)}">{_e(f.severity)}</span> '
            f"<code>{_e(f.code)}</code> {_e(f.name)} &middot; est. saving {_e(saving)}</h3>",
            f"<p>{_e(f.message)}</p>",
        ]
        if scalars:
            parts.append(
                "<table><tbody>"
                + "".join(f"<tr><th>{_e(k)}</th><td>{_e(fmt_evidence(k, v))}</td></tr>" for k, v in scalars.items())
                + "</tbody></table>"
            )
        for k, rows in f.evidence.items():
            if isinstance(rows, list) and rows and isinstance(rows[0], dict):
                parts.append(f'<p class="meta">{_e(k)}</p>' + _table(rows))
        if f.saving_basis:
            parts.append(f'<p class="meta">Saving estimate: {_e(f.saving_basis)}</p>')
        parts.append(f'<p class="fix"><b>Fix</b> [{_e(f.fix.safety)}]: {_e(f.fix.summary)}</p></section>')
        out.append("\n".join(parts))
    if report.skipped:
        out.append('<h2>Skipped rules</h2><ul class="skipped">')
        out += [
            f"<li><code>{_e(k.code)}</code> {_e(k.name)}: {_e(dedupe_vendor(k.reason))}</li>" for k in report.skipped
        ]
        out.append("</ul>")
    return out


def findings_html(report: Any) -> str:
    """The summary line and the findings of a report as an HTML fragment (no plots, no
    script): what a notebook shows for a Report."""
    return (
        f'<div class="tracedoc"><p><b>{_e(summary_line(report))}</b></p>' + "\n".join(findings_parts(report)) + "</div>"
    )


def _plotly():
    try:
        import plotly.graph_objects as go
        import plotly.offline
    except ImportError:
        from tracedoc.errors import TracedocError

        raise TracedocError("--format html and Report.plot() need plotly: pip install 'tracedoc[html]'") from None
    return go, plotly.offline


def step_breakdown_figure(report: Any) -> Any:
    """A plotly Figure: the step-time breakdown of every step, stacked (ms per category).

    Raises:
        tracedoc.errors.TracedocError: plotly is not installed.
    """
    go, _ = _plotly()
    fig = go.Figure()
    steps = [str(r.get("step")) for r in report.steps]
    for key, label, _, _ in BREAKDOWN:
        col = key.replace("_share", "_ms")
        fig.add_bar(name=label, x=steps, y=[r.get(col, 0.0) for r in report.steps])
    fig.update_layout(barmode="stack", xaxis_title="step", yaxis_title="ms", title="Step-time breakdown")
    fig.update_xaxes(type="category")
    return fig


class HtmlRenderer:
    """A Report (or a multi-rank report) as one self-contained HTML page.

    Raises:
        tracedoc.errors.TracedocError: plotly is not installed (exit code 2, with the
            install hint).
    """

    def _plotly(self):
        return _plotly()

    def _fig_html(self, fig: Any, div_id: str) -> str:
        fig.update_layout(margin={"l": 60, "r": 20, "t": 40, "b": 40}, height=360, template="plotly_white")
        return fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=div_id,
            config={"displaylogo": False, "responsive": True, "typesetMath": False},
        )

    def _page(self, title: str, body: list[str]) -> str:
        _, offline = self._plotly()
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{_e(title)}</title>'
            f"<style>{CSS}</style><script>{offline.get_plotlyjs()}</script></head>\n<body>\n"
            + "\n".join(body)
            + "\n</body></html>\n"
        )

    def _charts(self, report: Any) -> list[str]:
        go, _ = self._plotly()
        out: list[str] = []
        if report.steps:
            fig = step_breakdown_figure(report)
            out += ["<h2>Step-time breakdown, every step</h2>", self._fig_html(fig, "step-breakdown")]
        ledger = getattr(report, "idle_ledger", None)
        if ledger:
            fig = go.Figure()
            devices = list(ledger)
            causes: list[str] = []
            for d in devices:
                causes += [c for c in ledger[d] if c not in causes]
            for c in causes:
                fig.add_bar(name=_p(c), x=[_p(d) for d in devices], y=[ledger[d].get(c, 0.0) for d in devices])
            fig.update_layout(barmode="stack", yaxis_title="ms per step", title="Idle ledger")
            out += ["<h2>Idle ledger</h2>", self._fig_html(fig, "idle-ledger")]
        kc = getattr(report, "kernels", None)
        if kc:
            cats = {r["category"]: r["ms_per_step"] for r in kc["by_category"]}
            top = kc["top"]
            fig = go.Figure(go.Bar(x=[_p(c) for c in cats], y=list(cats.values())))
            fig.update_layout(yaxis_title="ms per step", title="Kernel time by category")
            out += ["<h2>Kernel time by category</h2>", self._fig_html(fig, "kernel-categories")]
            fig = go.Figure(
                go.Bar(
                    y=[_p(t["kernel"][:60]) for t in top][::-1],
                    x=[t["ms_per_step"] for t in top][::-1],
                    orientation="h",
                    hovertext=[_p(t["kernel"]) for t in top][::-1],
                )
            )
            fig.update_layout(xaxis_title="ms per step", title="Top kernels", height=420)
            out += ["<h2>Top kernels</h2>", self._fig_html(fig, "top-kernels"), _table(top)]
        return out

    def render(self, report: Any) -> str:
        """The page as text (the kernel charts come from the report's ``kernels`` section and
        are left out without one)."""
        t, s = report.trace, report.signals
        steps = (
            f"{s.get('step_count')} of {plural(t['n_steps'], 'ProfilerStep')} averaged, step time "
            f"{s.get('step_time_ms', 0) or 0:.2f} ms"
            if t["has_steps"]
            else f"no ProfilerStep annotations: the whole trace ({t['span_ms']:.1f} ms) is one window"
        )
        body = [
            f"<h1>tracedoc report: <code>{_e(t['path'])}</code></h1>",
            f'<p class="meta">device: {_e(device_label(t["device"]))} &middot; events: {t["n_events"]:,} &middot; {_e(steps)}</p>',
            f'<p class="summary" id="summary">{_e(summary_line(report))}</p>',
        ]
        breakdown = ", ".join(
            f"{label} {s[key]:.1%}" for key, label, _, _ in BREAKDOWN if isinstance(s.get(key), (int, float))
        )
        if breakdown:
            body.append(f'<p class="meta">mean step: {_e(breakdown)}</p>')
        charts = self._charts(report)
        body += charts[:2]  # the step breakdown first: the overview, then the findings
        body += findings_parts(report)
        body += charts[2:]
        return self._page(f"tracedoc: {t['path']}", body)

    def render_ranks(self, mr: Any) -> str:
        """The page of the ranks of one job: step time per rank, then each rank's findings."""
        go, _ = self._plotly()
        ok = [r for r in mr.ranks if r.report]
        body = [
            f"<h1>tracedoc rank report: <code>{_e(mr.directory)}</code></h1>",
            f'<p class="summary" id="summary">{_e(plural(len(mr.ranks), "trace"))}, '
            f"{_e(plural(sum(len(r.report.findings) for r in ok), 'finding'))} in all</p>",
        ]
        fig = go.Figure(
            go.Bar(x=[_p(r.label) for r in ok], y=[r.report.signals.get("step_time_ms") for r in ok], name="step time")
        )
        fig.update_layout(yaxis_title="ms", title="Step time per rank")
        body += ["<h2>Step time per rank</h2>", self._fig_html(fig, "rank-step-time")]
        rows = [
            {
                "rank": r.label,
                "file": r.path,
                "step_time_ms": r.report.signals.get("step_time_ms") if r.report else None,
                "findings": " ".join(f.code for f in r.report.findings) if r.report else (r.error or ""),
            }
            for r in mr.ranks
        ]
        body.append(_table(rows))
        for r in ok:
            body.append(f"<h2>{_e(r.label)}: <code>{_e(r.path)}</code></h2>")
            body += findings_parts(r.report)[1:]
        return self._page(f"tracedoc: {mr.directory}", body)
