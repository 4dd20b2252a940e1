"""``--format html``: one self-contained HTML page (no network: it opens offline).

The page holds the findings (message, evidence with its tables, fix), a stacked bar of
the step-time breakdown for every step, the idle ledger (when the report has one),
kernel time by category and the top kernels (when the report has kernels), and for a
rank directory the cross-rank summary (slowest rank, the straggler at the collectives with
its lag per collective kind and per step, findings on most ranks versus one) and the step
time of every rank. Plots are made with plotly (the ``html`` extra:
``pip install 'tracedoc[html]'``). plotly.js is embedded once in the page, gzipped and in
base64 (about 2 MB rather than 4.8 MB); the page unpacks it with the browser's own
``DecompressionStream`` (Chrome 80, Firefox 113, Safari 16.4 and later) and then draws each
chart from its figure JSON, so it needs nothing else and fetches nothing. Every chart takes
its colours from one colour-blind-safe palette (:mod:`tracedoc.render.palette`), and kernel
names shortened for an axis stay distinct (:func:`kernel_labels`), the full name in the hover. Trace text (kernel names, paths, devices)
is escaped for where it goes (:mod:`tracedoc.render.escape`): :func:`~tracedoc.render.escape.html`
in the page, :func:`~tracedoc.render.escape.plotly` in the charts' labels, legends and hover
text (plotly draws its own ``<a href>``, ``<span style>`` and ``<br>`` tags).

Kernel time by category and the top kernels come from the report's ``kernels`` section (the
table signals ``kernel_time_by_category`` and ``top_kernels`` of :mod:`tracedoc.signals.gpu`):
the page is drawn from the document alone, never from the trace's frames.
"""

from __future__ import annotations

import base64
import functools
import gzip
import os
from collections import defaultdict
from typing import Any

from tracedoc.render.escape import html as _e
from tracedoc.render.escape import plotly as _p
from tracedoc.render.palette import colour, colours_for
from tracedoc.render.report import (
    BREAKDOWN,
    ORDER_NOTE,
    column_label,
    dedupe_vendor,
    device_label,
    fmt_evidence,
    plural,
    short_name,
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
        from tracedoc.errors import TracedocError, install_hint

        raise TracedocError(f"--format html and Report.plot() need plotly: {install_hint('html')}") from None
    return go, plotly.offline


#: What every chart's toolbar shows (no plotly logo, no MathJax, resized with the window).
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True, "typesetMath": False}

#: The page's one script that draws the charts: it unpacks plotly.js (gzip, base64) with the
#: browser's DecompressionStream, runs it, and draws each ``div.plotly-graph-div`` from the JSON
#: in the ``<script type="application/json">`` after it. No request leaves the page; a browser
#: without DecompressionStream shows a line saying so where the charts would be.
LOADER_JS = """(() => {
  const ready = new Promise((done) => {
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", done);
    else done();
  });
  const say = (text) => ready.then(() => {
    for (const div of document.querySelectorAll("div.plotly-graph-div")) div.textContent = text;
  });
  if (typeof DecompressionStream !== "function") {
    say("This browser cannot unpack the charts: it has no DecompressionStream " +
        "(Chrome 80, Firefox 113, Safari 16.4 and later have it).");
    return;
  }
  const packed = Uint8Array.from(atob(PLOTLYJS), (c) => c.charCodeAt(0));
  const stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream("gzip"));
  new Response(stream).text().then((code) => {
    const script = document.createElement("script");
    script.textContent = code;
    document.head.appendChild(script);
    return ready;
  }).then(async () => {
    for (const div of document.querySelectorAll("div.plotly-graph-div")) {
      const fig = JSON.parse(document.getElementById(div.id + "-figure").textContent);
      await Plotly.newPlot(div, fig.data, fig.layout, CONFIG);
    }
  }).catch((err) => {
    console.error(err);
    say("The charts could not be drawn: " + err);
  });
})();"""


@functools.lru_cache(maxsize=1)
def packed_plotlyjs() -> str:
    """The plotly.js that plotly ships, gzipped (level 9, no timestamp: the same text every
    time) and in base64: what the page embeds (about 2 MB for 4.8 MB of JavaScript)."""
    _, offline = _plotly()
    return base64.b64encode(gzip.compress(offline.get_plotlyjs().encode("utf-8"), 9, mtime=0)).decode("ascii")


def _unique(labels: list[str]) -> list[str]:
    """``labels`` with a repeated one numbered (``name``, ``name #2``), so no two bars of a
    category axis fall on one category (plotly would stack them into one bar)."""
    seen: dict[str, int] = {}
    out = []
    taken = set(labels)
    for label in labels:
        n = seen.get(label, 0) + 1
        seen[label] = n
        new = label if n == 1 else f"{label} #{n}"
        while n > 1 and new in taken:  # a trace may name a kernel "x #2" itself
            n += 1
            new = f"{label} #{n}"
        taken.add(new)
        out.append(new)
    return out


def kernel_labels(names: list[str], limit: int = 48) -> list[str]:
    """Short, distinct axis labels for kernel names: :func:`~tracedoc.render.report.short_name`
    (no ``void``, template and parameter lists as ``<…>``/``(…)``); names that shorten to
    the same label get the part where they first differ in brackets
    (``at::native::vectorized_elementwise_kernel<…>(…) [AddFunctor<float>, at::detai…]``), and
    any label still repeated a number (``#2``). The full name goes in the hover text."""
    labels = [short_name(n, limit) for n in names]
    groups: dict[str, list[int]] = defaultdict(list)
    for i, label in enumerate(labels):
        groups[label].append(i)
    for label, idx in groups.items():
        if len(idx) < 2:
            continue
        raw = [names[i].removeprefix("void ") for i in idx]
        if len(set(raw)) < 2:  # the same name: numbered below
            continue
        p = len(os.path.commonprefix(raw))
        for i, r in zip(idx, raw, strict=True):
            cuts = [r.rfind(sep, 0, p) + len(sep) for sep in (", ", "<", "(", "::", " ") if r.rfind(sep, 0, p) >= 0]
            start = max(cuts, default=0)
            part = r[start:] if p - start <= 12 else "…" + r[p - 12 :]  # where they differ, in view
            labels[i] = f"{label} [{part if len(part) <= 28 else part[:27] + '…'}]"
    return _unique(labels)


def step_breakdown_figure(report: Any) -> Any:
    """A plotly Figure: the step-time breakdown of every step, stacked (ms per category), in
    the report's palette (:mod:`tracedoc.render.palette`).

    Raises:
        tracedoc.errors.TracedocError: plotly is not installed.
    """
    go, _ = _plotly()
    fig = go.Figure()
    steps = [str(r.get("step")) for r in report.steps]
    cols = colours_for(key.removesuffix("_share") for key, *_ in BREAKDOWN)
    for key, label, _, _ in BREAKDOWN:
        col = key.replace("_share", "_ms")
        fig.add_bar(
            name=label,
            x=steps,
            y=[r.get(col, 0.0) for r in report.steps],
            marker_color=cols[key.removesuffix("_share")],
        )
    fig.update_layout(barmode="stack", xaxis_title="step", yaxis_title="ms", title="Step-time breakdown")
    fig.update_xaxes(type="category")
    return fig


def _ledger_figure(go: Any, ledger: dict[str, dict[str, float]]) -> Any:
    """The idle ledger, stacked per device; causes that are zero on every device left out."""
    devices = list(ledger)
    causes: list[str] = []
    for d in devices:
        causes += [c for c in ledger[d] if c not in causes and any(ledger[x].get(c) for x in devices)]
    cols = colours_for(causes)
    fig = go.Figure()
    for c in causes:
        fig.add_bar(
            name=_p(c.replace("_", " ")),
            x=[_p(d) for d in devices],
            y=[ledger[d].get(c, 0.0) for d in devices],
            marker_color=cols[c],
        )
    fig.update_layout(barmode="stack", yaxis_title="ms per step", title="Idle ledger")
    return fig


def _kernel_figures(go: Any, kc: dict[str, Any]) -> tuple[Any, Any]:
    """Kernel time by category, and the top kernels coloured by their category (one legend
    entry each); each kernel on its own label, its full name in the hover."""
    cats = {r["category"]: r["ms_per_step"] for r in kc["by_category"]}
    top = kc["top"]
    cols = colours_for([*cats, *(t.get("category", "other compute") for t in top)])
    fig = go.Figure(go.Bar(x=[_p(c) for c in cats], y=list(cats.values()), marker_color=[cols[c] for c in cats]))
    fig.update_layout(yaxis_title="ms per step", title="Kernel time by category")
    labels = [_p(lab) for lab in kernel_labels([t["kernel"] for t in top])]
    bars = go.Figure()
    for cat in dict.fromkeys(t.get("category", "other compute") for t in top):
        rows = [(lab, t) for lab, t in zip(labels, top, strict=True) if t.get("category", "other compute") == cat]
        bars.add_bar(
            name=_p(cat),
            y=[lab for lab, _ in rows],
            x=[t["ms_per_step"] for _, t in rows],
            orientation="h",
            hovertext=[_p(t["kernel"]) for _, t in rows],
            hovertemplate="%{hovertext}<br>%{x:.2f} ms per step<extra>%{fullData.name}</extra>",
            marker_color=cols[cat],
        )
    bars.update_layout(xaxis_title="ms per step", title="Top kernels", height=120 + 30 * len(top), barmode="stack")
    bars.update_yaxes(categoryorder="array", categoryarray=labels[::-1], automargin=True)
    return fig, bars


def roofline_figure(go: Any, view: dict[str, Any]) -> Any | None:
    """The roofline of the op view: each op group with known FLOPs and bytes as a point at its
    arithmetic intensity (FLOP/byte, log x) and achieved TFLOP/s (log y), sized by its GPU time
    per step, coloured by bound; with the device's bandwidth roof and its compute roofs (fp32,
    tf32 and 16-bit Tensor Core peaks) when the peak is known (Williams, Waterman and
    Patterson, "Roofline", CACM 52(4), 2009). None when no op has both FLOPs and bytes."""
    rows = [r for r in view.get("ops") or [] if r.get("intensity") and r.get("tflops")]
    if not rows:
        return None
    cols = colours_for(["compute", "memory", "unknown", "fp32", "tf32_tc", "bf16_tc"])
    fig = go.Figure()
    for bound in ("compute", "memory", None):
        pts = [r for r in rows if r.get("bound") == bound]
        if not pts:
            continue
        name = bound or "unknown"
        fig.add_scatter(
            x=[r["intensity"] for r in pts],
            y=[r["tflops"] for r in pts],
            mode="markers",
            name=_p(f"{name}-bound" if bound else "bound unknown"),
            marker={
                "size": [6 + 30 * (r["gpu_ms_per_step"] / max(x["gpu_ms_per_step"] for x in rows)) ** 0.5 for r in pts],
                "color": cols[name],
                "opacity": 0.8,
            },  # fmt: skip
            hovertext=[_p(f"{r['op']} {r.get('input_dims') or ''}"[:200]) for r in pts],
            hovertemplate="%{hovertext}<br>%{x:.1f} FLOP/byte, %{y:.2f} TFLOP/s<extra></extra>",
        )
    peak = view.get("peak") or {}
    xs = [min(r["intensity"] for r in rows) / 2, max(r["intensity"] for r in rows) * 2]
    bw = peak.get("mem_tbs")
    for key, label in (("fp32", "fp32"), ("tf32_tc", "tf32 Tensor Core"), ("bf16_tc", "16-bit Tensor Core")):
        top = peak.get(key)
        if top and bw:
            ridge = top / bw
            lo, hi = min(xs[0], ridge / 4), max(xs[1], ridge * 4)
            fig.add_scatter(
                x=[lo, ridge, hi], y=[bw * lo, top, top], mode="lines", name=_p(f"{label} roof ({top:g} TFLOP/s)"),
                line={"dash": "dot", "width": 1, "color": cols[key]}, hoverinfo="skip",
            )  # fmt: skip
    title = f"Roofline on {peak['name']}" if peak.get("name") else "Achieved throughput (device peak unknown)"
    fig.update_layout(title=_p(title), height=440)
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOP/byte)")
    fig.update_yaxes(type="log", title="achieved TFLOP/s")
    return fig


def _op_rows(view: dict[str, Any]) -> list[dict[str, Any]]:
    """The op view's rows for the page's table (the columns a person reads)."""
    keep = ("op", "input_dims", "dtype", "calls_per_step", "gpu_ms_per_step", "tflops", "tbps", "pct_of_peak", "bound")
    return [{k: r.get(k) for k in keep} for r in view.get("ops") or []]


class HtmlRenderer:
    """A Report (or a multi-rank report) as one self-contained HTML page.

    Raises:
        tracedoc.errors.TracedocError: plotly is not installed (exit code 2, with the
            install hint).
    """

    def _plotly(self):
        return _plotly()

    def _fig_html(self, fig: Any, div_id: str) -> str:
        """A chart: its ``div`` and its figure JSON, which the page's loader draws."""
        import plotly.io

        fig.update_layout(margin={"l": 60, "r": 20, "t": 40, "b": 40}, template="plotly_white")
        height = fig.layout.height or 360
        fig.update_layout(height=height)
        # "<" as \u003c: no "</script>" or "<!--" can end or bend the script, whatever a name holds
        data = plotly.io.to_json(fig, validate=False).replace("<", "\\u003c")
        return (
            f'<div id="{_e(div_id)}" class="plotly-graph-div" style="height:{height}px; width:100%;"></div>\n'
            f'<script type="application/json" id="{_e(div_id)}-figure">{data}</script>'
        )

    def _page(self, title: str, body: list[str]) -> str:
        import json

        loader = LOADER_JS.replace("CONFIG", json.dumps(PLOTLY_CONFIG)).replace(
            "PLOTLYJS", '"' + packed_plotlyjs() + '"'
        )
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{_e(title)}</title>'
            f"<style>{CSS}</style><script>{loader}</script></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n"
        )

    def _charts(self, report: Any) -> list[str]:
        go, _ = self._plotly()
        out: list[str] = []
        if report.steps:
            fig = step_breakdown_figure(report)
            out += ["<h2>Step-time breakdown, every step</h2>", self._fig_html(fig, "step-breakdown")]
        ledger = getattr(report, "idle_ledger", None)
        if ledger:
            out += ["<h2>Idle ledger</h2>", self._fig_html(_ledger_figure(go, ledger), "idle-ledger")]
        kc = getattr(report, "kernels", None)
        if kc:
            cats, top = _kernel_figures(go, kc)
            out += ["<h2>Kernel time by category</h2>", self._fig_html(cats, "kernel-categories")]
            out += ["<h2>Top kernels</h2>", self._fig_html(top, "top-kernels"), _table(kc["top"])]
        view = getattr(report, "op_view", None)
        if view and view.get("ops"):
            out.append("<h2>Op view: achieved throughput against the device's peak</h2>")
            fig = roofline_figure(go, view)
            if fig is not None:
                out.append(self._fig_html(fig, "roofline"))
            out.append(_table(_op_rows(view)))
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
        """The page of the ranks of one job: the cross-rank summary (slowest rank, the
        straggler at the collectives, findings by how many ranks have them), step time per
        rank, then each rank's findings."""
        ok = [r for r in mr.ranks if r.report]
        charts = self._rank_charts(mr)  # step time per rank; the wait caused at the collectives
        body = [
            f"<h1>tracedoc rank report: <code>{_e(mr.directory)}</code></h1>",
            f'<p class="summary" id="summary">{_e(ranks_headline(mr))}</p>',
            *cross_rank_parts(mr),
            *charts[2:],
            *charts[:2],
        ]
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
        body += _left_out_parts(mr)
        for r in ok:
            body.append(f"<h2>{_e(r.label)}: <code>{_e(r.path)}</code></h2>")
            body += findings_parts(r.report)[1:]
        return self._page(f"tracedoc: {mr.directory}", body)

    def _rank_charts(self, mr: Any) -> list[str]:
        """Step time per rank (the slowest rank in the palette's ``slowest`` colour) and, when
        the collectives name a straggler, the wait each rank caused at them."""
        go, _ = self._plotly()
        ok = [r for r in mr.ranks if r.report]
        s = mr.summary or {}
        labels = [_p(x) for x in _unique([r.label for r in ok])]
        slow = s.get("slowest_step_time_ms") if s.get("slowest_lag_ms") else None  # none: all alike
        times = [r.report.signals.get("step_time_ms") for r in ok]
        fig = go.Figure(
            go.Bar(
                x=labels,
                y=times,
                name="step time",
                marker_color=[colour("slowest" if _is(t, slow) else "rank") for t in times],
            )
        )
        fig.update_layout(yaxis_title="ms", title="Step time per rank")
        fig.update_xaxes(type="category")
        out = ["<h2>Step time per rank</h2>", self._fig_html(fig, "rank-step-time")]
        c = s.get("collectives")
        if c and c.get("straggler") is not None:
            waits = c["caused_wait_ms"]
            names = list(waits)
            fig = go.Figure(
                go.Bar(
                    x=[_p(x) for x in _unique(names)],
                    y=list(waits.values()),
                    name="wait caused",
                    marker_color=[colour("slowest" if n == c["straggler"] else "rank") for n in names],
                )
            )
            fig.update_layout(yaxis_title="ms the others waited", title="Wait caused at the collectives, per rank")
            fig.update_xaxes(type="category")
            out += ["<h2>Wait caused at the collectives</h2>", self._fig_html(fig, "rank-collective-wait")]
        return out


def _is(value: Any, slowest: Any) -> bool:
    """A rank's step time is the slowest one (as the summary rounds it: ties all count)."""
    return isinstance(value, (int, float)) and slowest is not None and round(value, 3) == slowest


def ranks_headline(mr: Any) -> str:
    """The rank page's summary line: traces and findings, the slowest rank and how far it
    lags the median, the straggler at the collectives."""
    s = mr.summary or {}
    ok = [r for r in mr.ranks if r.report]
    line = f"{plural(len(mr.ranks), 'trace')}, {plural(sum(len(r.report.findings) for r in ok), 'finding')} in all"
    if s.get("slowest_rank") is not None and s.get("slowest_lag_pct") is not None and s.get("slowest_lag_ms"):
        line += (
            f"; slowest: {s['slowest_rank']} at {s['slowest_step_time_ms']:.2f} ms, "
            f"{s['slowest_lag_ms']:.2f} ms ({s['slowest_lag_pct']:.1f}%) behind the median"
        )
    elif s.get("slowest_rank") is not None:
        line += f"; step time alike on every rank ({s['slowest_step_time_ms']:.2f} ms)"
    c = s.get("collectives")
    if c and c.get("straggler") is not None:
        line += f"; straggler at the collectives: {c['straggler']}"
    return line


#: The cross-rank finding groups, as the terminal report names them.
SCOPES = (
    ("most", "Findings on most ranks (the job)"),
    ("some", "Findings on some ranks"),
    ("one", "Findings on one rank only (a straggler?)"),
)


def many_fragment(doc: Any, summary: str) -> str:
    """The HTML a notebook shows for the reports of several traces (a rank folder or unrelated
    traces, :mod:`tracedoc.report.ranks`): ``summary`` (the closing line), the cross-rank
    summary of a rank folder, the table of traces and each trace's findings. No plots, so no
    plotly. ``doc`` has its strings visible already (:func:`tracedoc.render.render` gives it so);
    each is escaped here for HTML."""
    parts = [f"<p><b>{_e(summary.strip())}</b></p>"]
    if doc.KIND == "ranks":
        parts += cross_rank_parts(doc)
    cols = ["label", "path", "step_time_ms", "n_findings", "top_code", "top_saving_ms", "error"]
    table = doc.tables.ranks[cols]
    parts.append(table.to_html(index=False, na_rep="", escape=True, float_format=lambda v: f"{v:,.2f}"))
    for r in doc._entries():
        if r.report is not None:
            parts.append(f"<h2>{_e(r.label)}: <code>{_e(r.path)}</code></h2>")
            parts += findings_parts(r.report)[1:]
    return '<div class="tracedoc">' + "\n".join(parts) + "</div>"


def cross_rank_parts(mr: Any) -> list[str]:
    """HTML fragments of the cross-rank summary, what the terminal, JSON and Markdown reports
    of a rank folder say (:mod:`tracedoc.render.ranks`): the median and slowest step time,
    findings by how many ranks have them, the collectives (straggler, lag per collective kind,
    per step, the worst ones), exposed communication, and what was left out."""
    s = mr.summary or {}
    if s.get("slowest_rank") is None:
        slow = "no rank has a step time"
    elif s.get("slowest_lag_pct") is None:
        slow = f"slowest: {s['slowest_rank']} at {s['slowest_step_time_ms']:.2f} ms"
    else:
        slow = (
            f"median step time {s['median_step_time_ms']:.2f} ms; slowest: {s['slowest_rank']} at "
            f"{s['slowest_step_time_ms']:.2f} ms, {s['slowest_lag_ms']:.2f} ms ({s['slowest_lag_pct']:.1f}%) "
            "behind the median"
        )
    out = ['<h2 id="cross-rank">Cross-rank summary</h2>', f'<p id="slowest">{_e(slow)}</p>']
    n = s.get("n_ranks", len(mr.ranks))
    for scope, title in SCOPES:
        rows = [
            {"code": f["code"], "name": f["name"], "severity": f["severity"], "on": f"{f['n_ranks']}/{n}"}
            | {"ranks": ", ".join(f["ranks"])}
            for f in s.get("findings", [])
            if f["scope"] == scope
        ]
        if rows:
            out += [f'<h3 id="findings-{scope}">{_e(title)}</h3>', _table(rows)]
    if not s.get("findings"):
        out.append("<p>No findings on any rank.</p>")
    out += _collective_parts(s.get("collectives"))
    exposed = s.get("exposed_comm_ms")
    if exposed and any(v is not None for v in exposed.values()):
        text = ", ".join(f"{k} {'n/a' if v is None else f'{v:.2f}'} ms" for k, v in exposed.items())
        out.append(f"<p>Exposed communication per step: {_e(text)}</p>")
    return out


def _collective_parts(c: dict[str, Any] | None) -> list[str]:
    """The collectives matched across ranks: who the others waited for, per kind, per step."""
    if not c:
        return []
    matched = f"{c['n_matched']:,} matched across {plural(c['n_ranks'], 'rank')}, from {c['source']}"
    out = [
        '<h3 id="collectives">Collectives</h3>',
        f"<p>{_e(matched)}.</p>",
    ]
    if c["straggler"] is None:
        return [*out, "<p>No straggler: the matched collectives took equally long on every rank.</p>"]
    per_step = c.get("straggler_lag_ms_per_step")
    out.append(
        f'<p id="straggler">Straggler: <b>{_e(c["straggler"])}</b> (arrived last in '
        f"{c['straggler_last_share']:.0%} of them); the others waited {c['straggler_lag_ms_total']:.2f} ms for it"
        + (f", {per_step:.2f} ms per step (median)" if per_step is not None else "")
        + ".</p>"
    )
    kinds = [
        {"collective": k["kind"], "count": k["count"], "last mostly": k["straggler"] or "-"}
        | {"lag ms in all": k["lag_ms_total"], "median lag ms": k["lag_ms_median"]}
        for k in c["kinds"]
    ]
    out += ['<p class="meta">lag per collective kind</p>', _table(kinds)]
    steps = [
        {"step": st["step"], "last": st["straggler"], "lag ms": st["lag_ms"]}
        for st in c["per_step"]
        if st["step"] is not None and st["straggler"]
    ]
    if steps:
        out += ['<p class="meta">per step: the rank the others waited for</p>', _table(steps)]
    worst = [
        {"collective": w["kind"], "#": w["index"], "step": w["step"], "late": w["straggler"], "lag ms": w["lag_ms"]}
        for w in c["worst"]
    ]
    if worst:
        out += ['<p class="meta">the collectives waited on longest</p>', _table(worst)]
    return out


def _left_out_parts(mr: Any) -> list[str]:
    """The traces that failed, the entries skipped, symlinks followed, notes."""
    items = [f"failed: {r.error or r.path}" for r in mr.failed]
    items += [f"skipped: {p} ({why})" for p, why in mr.skipped]
    items += [f"followed symlink outside the folder: {p}" for p in mr.followed]
    items += [f"note: {n}" for n in mr.notes]
    if not items:
        return []
    return ['<h3 id="left-out">Left out</h3><ul class="skipped">', *(f"<li>{_e(i)}</li>" for i in items), "</ul>"]
