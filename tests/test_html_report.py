"""What a person sees in the HTML report (issue 22): the cross-rank summary of a rank folder,
kernel labels that stay distinct, one colour-blind-safe palette, a page under half its old
size that draws its charts offline in a real headless Chromium, and ``--format html`` that
never pours a page into a terminal."""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import real_trace
from helpers import chromium, headless_chromium_args
from test_escaping import check_figures, check_html
from tracebuilder import dataloader_bound, write_comm_ranks

import tracedoc
from tracedoc.ranks import analyze_directory
from tracedoc.render import palette, render
from tracedoc.render.html import HtmlRenderer, kernel_labels, packed_plotlyjs, step_breakdown_figure

WORKERS0 = "v100_resnet50_workers0.pt.trace.json.gz"
#: The single-trace page of WORKERS0 before plotly.js was packed (plotly 6/7 embedded whole).
OLD_SIZE = 4_867_143


@pytest.fixture(scope="module")
def w0_report():
    return tracedoc.analyze(real_trace(WORKERS0))


@pytest.fixture(scope="module")
def w0_page(w0_report):
    return render(w0_report, "html")


def figures_of(doc, method: str = "render") -> list:
    """The plotly figures a page is drawn from (each chart, as the page's JSON holds it)."""
    seen: list = []
    renderer = HtmlRenderer()
    original = renderer._fig_html
    renderer._fig_html = lambda fig, div_id: seen.append((div_id, fig)) or original(fig, div_id)
    getattr(renderer, method)(tracedoc.render.escape.document(doc))
    return seen


# -- 4. size, self-contained, offline --------------------------------------------------------------


def test_the_page_is_under_half_its_old_size_and_embeds_plotly_whole(w0_page):
    import plotly.offline

    assert len(w0_page.encode()) < OLD_SIZE / 2
    # the embedded plotly.js is plotly's own, byte for byte, once unpacked
    packed = re.search(r'atob\("([A-Za-z0-9+/=]+)"\)', w0_page).group(1)
    assert packed == packed_plotlyjs()
    assert gzip.decompress(base64.b64decode(packed)).decode() == plotly.offline.get_plotlyjs()
    # self-contained: no element loads anything, no script asks the network for anything
    assert not re.search(r"<(script|img|iframe|link|object|embed|source)\b[^>]*\b(src|href|data)=", w0_page, re.I)
    outside_plotly = w0_page.replace(packed, "")
    assert not re.search(r"\b(fetch|XMLHttpRequest|import)\s*\(|https?://cdn", outside_plotly)
    check_html(w0_page)  # only tracedoc's tags; one script per chart and the loader


def offline_chromium(page: Path, tmp_path: Path) -> tuple[str, list[str], list[str]]:
    """Load ``page`` in headless Chromium with every host unresolvable and a proxy that refuses
    (no request can succeed), recording the network log. Returns the DOM after the scripts ran,
    the console lines, and the URLs the page itself asked for (the browser's own background
    requests carry no initiator and are left out)."""
    log = tmp_path / "net.json"
    r = subprocess.run(
        [
            *headless_chromium_args(chromium(), tmp_path / "profile"),
            "--proxy-server=socks5://127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--log-net-log={log}",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=10000",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    net = json.loads(log.read_text())
    types = {v: k for k, v in net["constants"]["logEventTypes"].items()}
    starts = [e.get("params", {}) for e in net["events"] if types.get(e["type"]) == "URL_REQUEST_START_JOB"]
    asked = [p["url"] for p in starts if "url" in p and p.get("initiator") != "not an origin"]
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    return r.stdout, console, asked


def test_the_offline_check_sees_a_page_that_asks_the_network(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><img src="http://example.invalid/a.png"><script>fetch("https://example.invalid/b")</script>'
    )
    _, _, asked = offline_chromium(bad, tmp_path)
    assert "http://example.invalid/a.png" in asked and "https://example.invalid/b" in asked


def test_the_charts_draw_with_no_network(tmp_path, w0_page):
    page = tmp_path / "report.html"
    page.write_text(w0_page, encoding="utf-8")
    dom, console, asked = offline_chromium(page, tmp_path)
    assert asked == [] and console == []
    for div in ("step-breakdown", "idle-ledger", "kernel-categories", "top-kernels"):
        assert re.search(rf'id="{div}"[^>]*class="[^"]*js-plotly-plot', dom), div
    assert dom.count('class="main-svg"') >= 4
    body = dom[dom.index("<body") :]
    assert "could not be drawn" not in body and "cannot unpack" not in body


# -- 2. kernel labels ------------------------------------------------------------------------------


def test_kernel_labels_that_shorten_alike_stay_distinct(w0_report):
    names = [t["kernel"] for t in w0_report.kernels["top"]]
    labels = kernel_labels(names)
    assert len(set(labels)) == len(labels) == 10
    vec = [lab for lab in labels if lab.startswith("at::native::vectorized_elementwise_kernel<…>(…)")]
    assert len(vec) == 2 and "AddFunctor" in vec[0] and "threshold_kernel_impl" in vec[1]
    assert all(len(lab) <= 80 for lab in labels)
    # names alike for longer than the label shows, and the same name twice, still get a label each
    same_start = ["void k<" + "a" * 40 + f"{i}>(int)" for i in range(3)]
    assert len(set(kernel_labels(same_start + same_start[:1]))) == 4
    assert kernel_labels(["x", "x #2", "x"]) == ["x", "x #2", "x #3"]


def test_the_top_kernels_chart_has_one_bar_per_kernel_and_full_names_in_the_hover(w0_report):
    figs = dict(figures_of(w0_report))
    top = figs["top-kernels"]
    ys = [y for tr in top.data for y in tr.y]
    hover = [h for tr in top.data for h in tr.hovertext]
    assert len(ys) == len(set(ys)) == 10  # no two kernels stacked on one category
    assert sorted(hover) == sorted(
        t["kernel"].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for t in w0_report.kernels["top"]
    )
    assert {tr.name for tr in top.data} == {t["category"] for t in w0_report.kernels["top"]}
    check_figures([f for _, f in figures_of(w0_report)])  # every label and hover escaped


# -- 3. one palette --------------------------------------------------------------------------------


def test_every_chart_takes_its_colours_from_the_one_palette(w0_report, tmp_path):
    import plotly.colors

    assert palette.colours() == list(plotly.colors.qualitative.Safe) and palette.NAME == "Safe"
    figs = dict(figures_of(w0_report))
    mr = analyze_directory(comm_ranks(tmp_path), jobs=1)
    figs |= dict(figures_of(mr, "render_ranks"))
    assert {"step-breakdown", "idle-ledger", "kernel-categories", "top-kernels", "rank-step-time"} <= set(figs)
    assert "rank-collective-wait" in figs
    pal = set(palette.colours())
    for div_id, fig in figs.items():
        used = []
        for tr in fig.data:
            c = tr.marker.color if tr.marker.color is not None else tr.line.color  # markers, or a roof line
            used += [c] if isinstance(c, str) else list(c)
        assert used and set(used) <= pal, div_id
        if len(fig.data) > 1:  # a stacked chart: each series its own colour
            colours = {tr.marker.color if tr.marker.color is not None else tr.line.color for tr in fig.data}
            assert len(colours) == len(fig.data), div_id
    # a thing keeps its colour across charts: the DataLoader, kernels
    by_name = {(d, tr.name): tr.marker.color for d, f in figs.items() for tr in f.data}
    assert (
        by_name[("step-breakdown", "DataLoader")]
        == by_name[("idle-ledger", "dataloader")]
        == palette.colour("dataloader")
    )
    assert by_name[("step-breakdown", "kernel")] == palette.colour("kernel")
    assert step_breakdown_figure(w0_report).data[0].marker.color == palette.colour("kernel")  # Report.plot() too


def test_palette_colours_stay_distinct_in_a_chart_while_they_last():
    cols = palette.colours_for(["kernel", "GEMM/conv on Tensor Cores", "a", "b", "dataloader"])
    assert len(set(cols.values())) == 5 and cols["kernel"] == palette.colour("kernel")
    many = palette.colours_for([f"s{i}" for i in range(11)])
    assert set(many.values()) == set(palette.colours())


# -- 1. the cross-rank summary of a rank folder ----------------------------------------------------


def comm_ranks(tmp_path: Path) -> Path:
    """Three ranks; rank 2 makes the others wait at both collectives of step 1 (the hand count
    of tests/test_ranks.py: straggler rank 2, 0.2 ms caused in all)."""
    d = tmp_path / "comm"
    d.mkdir(exist_ok=True)
    write_comm_ranks(d)
    return d


def test_a_rank_page_carries_the_straggler_and_the_lag_per_collective(tmp_path):
    mr = analyze_directory(comm_ranks(tmp_path), jobs=1)
    page = render(mr, "html")
    text = " ".join(check_html(page).split())
    assert "straggler at the collectives: rank 2" in text  # the headline
    assert "Straggler: rank 2 (arrived last in 50% of them); the others waited 0.20 ms for it" in text
    # the lag per collective kind: the hand count of tests/test_ranks.py (AllReduce 0.15 ms, AllGather 0.1)
    c = mr.summary["collectives"]
    assert {k["kind"]: k["lag_ms_total"] for k in c["kinds"]} == {"AllReduce": 0.15, "AllGather": 0.1}
    for k in c["kinds"]:
        cells = [k["kind"], k["count"], k["straggler"], k["lag_ms_total"], k["lag_ms_median"]]
        assert re.search("".join(rf"<td[^>]*>{re.escape(str(v))}</td>" for v in cells), page), k
    for st in c["per_step"]:  # per step: who the others waited for
        assert re.search(rf"<td[^>]*>{st['step']}</td><td[^>]*>{st['straggler']}</td>", page), st
    assert 'id="rank-collective-wait"' in page and 'id="rank-step-time"' in page
    assert page.index('id="cross-rank"') < page.index('id="rank-step-time"')  # the summary comes first


def test_a_rank_page_groups_findings_by_how_many_ranks_have_them(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    for r, (step, dl) in enumerate([(1000.0, 20.0), (1000.0, 20.0), (1500.0, 700.0), (1010.0, 20.0)]):
        doc = dataloader_bound(n_steps=4, step_us=step, dl_us=dl).doc()
        doc["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": 4}
        (d / f"rank-{r}.json").write_text(json.dumps(doc))
    mr = analyze_directory(d, jobs=1)
    page = render(mr, "html")
    text = " ".join(check_html(page).split())
    s = mr.summary
    assert s["slowest_rank"] == "rank 2"
    assert f"slowest: rank 2 at {s['slowest_step_time_ms']:.2f} ms" in text and "behind the median" in text
    for f in s["findings"]:
        title = {"most": "Findings on most ranks", "some": "Findings on some ranks", "one": "Findings on one rank only"}
        assert title[f["scope"]] in text and f"{f['n_ranks']}/4" in text
        assert f'id="findings-{f["scope"]}"' in page
    # the slowest rank's bar stands out in the palette's "slowest" colour, the others alike
    fig = dict(figures_of(mr, "render_ranks"))["rank-step-time"]
    colours = list(fig.data[0].marker.color)
    assert colours[2] == palette.colour("slowest") and set(colours[:2] + colours[3:]) == {palette.colour("rank")}


def test_hostile_rank_labels_and_paths_are_escaped_on_the_rank_page(tmp_path):
    d = tmp_path / "job<script>"
    d.mkdir()
    for r in range(2):
        doc = dataloader_bound(n_steps=4).doc()
        doc["distributedInfo"] = {"backend": "nccl", "rank": r, "world_size": 2}
        (d / f"rank-{r}<img src=x>\u202e.json").write_text(json.dumps(doc))
    mr = analyze_directory(d, jobs=1)
    page = render(mr, "html")
    check_html(page)
    assert "<img src=x>" not in page and "&lt;img src=x&gt;" in page
    check_figures([f for _, f in figures_of(mr, "render_ranks")])


# -- 5. never a page in the terminal ---------------------------------------------------------------


def _in_a_terminal(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run ``python -m tracedoc`` with stdout a pseudo-terminal; (exit code, stdout, stderr)."""
    import pty

    leader, follower = pty.openpty()
    try:
        p = subprocess.Popen(
            [sys.executable, "-m", "tracedoc", *args],
            stdout=follower,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=os.environ | {"TRACEDOC_NO_PROGRESS": "1"},
        )
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        err = p.stderr.read().decode()
        return p.wait(timeout=300), out.decode(errors="replace"), err
    finally:
        os.close(leader)


def test_html_to_a_terminal_goes_to_a_file_named_after_the_trace(tmp_path):
    trace = dataloader_bound(n_steps=4).write(tmp_path / "my_run.pt.trace.json")
    work = tmp_path / "cwd"
    work.mkdir()
    code, out, err = _in_a_terminal(["analyze", str(trace), "--format", "html"], work)
    assert code in (0, 1), err
    assert "<html" not in out and "<!DOCTYPE" not in out  # nothing poured into the terminal
    written = work / "my_run.html"
    assert written.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    lines = err.strip().splitlines()
    assert lines == [
        "tracedoc: wrote the HTML report to my_run.html (stdout is a terminal; -o FILE writes it elsewhere)"
    ]


def test_html_with_o_says_where_and_piped_html_goes_to_stdout(tmp_path):
    trace = dataloader_bound(n_steps=4).write(tmp_path / "t.json")
    out = tmp_path / "r.html"
    r = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", str(trace), "--format", "html", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode in (0, 1) and r.stdout == ""
    assert r.stderr == f"tracedoc: wrote the HTML report to {out}\n"
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    piped = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", str(trace), "--format", "html"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert piped.stdout.startswith("<!DOCTYPE html>") and piped.stderr == ""
    assert sorted(p.name for p in tmp_path.glob("*.html")) == ["r.html"]


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("fixtures/v100_resnet50_workers0.pt.trace.json.gz", "v100_resnet50_workers0.html"),
        ("rank-0.json.gz", "rank-0.html"),
        ("https://host/x/trace.json", "trace.html"),
        ("-", "tracedoc-report.html"),
        ("a b\x1b;rm.json", "a_b__rm.html"),
        ("..", "tracedoc-report.html"),
    ],
)
def test_the_html_file_name_comes_from_the_trace(source, name):
    from tracedoc.cli.output import html_path

    report = type("R", (), {"KIND": "report"})()
    report.trace = {"path": source}
    assert html_path(report) == Path(name)


def test_a_rank_folder_names_its_html_file(tmp_path):
    from tracedoc.cli.output import html_path

    mr = type("M", (), {"KIND": "ranks"})()
    mr.directory = str(tmp_path / "job") + "/"
    assert html_path(mr) == Path("job.html")
    mr.directory = "."
    assert html_path(mr).suffix == ".html" and html_path(mr).stem
