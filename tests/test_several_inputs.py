"""Several inputs (issue 22, "What a person sees"): GitHub annotations and one SARIF log for a
folder of benchmarks, the overview table of unrelated traces, ``**`` globs, TensorBoard log
directories, and a one-line error naming the format of another profiler's output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from conftest import FIXTURES
from tracebuilder import dataloader_bound

from tracedoc.errors import TraceLoadError
from tracedoc.ranks import discover as discover_mod
from tracedoc.ranks.discover import discover, tensorboard_run


def run(*args, cwd=None, stdin=None, columns=80):
    return subprocess.run(
        [sys.executable, "-m", "tracedoc", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=180,
        stdin=stdin,
        env=os.environ | {"COLUMNS": str(columns), "TRACEDOC_NO_PROGRESS": "1"},
    )


@pytest.fixture
def benchmarks(tmp_path):
    """Three unrelated traces (no rank anywhere) and one that cannot be read."""
    d = tmp_path / "bench"
    d.mkdir()
    dataloader_bound(dl_us=400.0).write(d / "resnet_baseline_with_a_rather_long_name.pt.trace.json")
    dataloader_bound(dl_us=100.0).write(d / "resnet_workers.pt.trace.json.gz", gz=True)
    dataloader_bound(dl_us=10.0).write(d / "resnet_pinned.json")
    (d / "broken.json").write_bytes(b'{"traceEvents": [')
    return d


# -- 1. --format github and sarif on several traces -----------------------------------------------


@pytest.fixture(scope="module")
def sarif_validator():
    schema = json.loads((FIXTURES / "schemas" / "sarif-schema-2.1.0.json").read_text())
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_one_sarif_log_for_a_folder_of_traces(benchmarks, sarif_validator):
    r = run("analyze", benchmarks, "--format", "sarif")
    assert r.returncode == 1, r.stderr  # findings
    log = json.loads(r.stdout)
    sarif_validator.validate(log)
    assert len(log["runs"]) == 1
    run_ = log["runs"][0]
    uris = [a["location"]["uri"] for a in run_["artifacts"]]
    assert [u.rsplit("/", 1)[-1] for u in uris] == [
        "resnet_baseline_with_a_rather_long_name.pt.trace.json",
        "resnet_pinned.json",
        "resnet_workers.pt.trace.json.gz",
    ]
    located = set()
    for res in run_["results"]:
        loc = res["locations"][0]["physicalLocation"]["artifactLocation"]
        assert uris[loc["index"]] == loc["uri"]
        located.add(loc["uri"].rsplit("/", 1)[-1])
    # the DataLoader finding of both DataLoader-bound traces, each on its own trace
    assert {"resnet_baseline_with_a_rather_long_name.pt.trace.json", "resnet_workers.pt.trace.json.gz"} <= located
    failed = [n for n in run_["invocations"][0]["toolExecutionNotifications"] if n["level"] == "error"]
    assert len(failed) == 1 and "broken.json could not be analyzed" in failed[0]["message"]["text"]


def test_one_stream_of_github_annotations_each_naming_its_trace(benchmarks):
    r = run("analyze", benchmarks, "--format", "github")
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    ann = [ln for ln in lines if ln.startswith("::")]
    assert all(" file=" in ln and ",title=" in ln for ln in ann)
    td101 = [ln for ln in ann if "TD101 dataloader-stall" in ln]
    # the title leads with the trace's file name (its colon escaped as a property value must be)
    assert {ln.split("title=", 1)[1].split("%3A", 1)[0] for ln in td101} == {
        "resnet_baseline_with_a_rather_long_name.pt.trace.json",
        "resnet_workers.pt.trace.json.gz",
    }
    for ln in td101:
        name = ln.split("title=", 1)[1].split("%3A", 1)[0]
        assert ln.startswith("::error file=") and name in ln.split(",title=", 1)[0]
    assert any(ln.startswith("::error file=") and "broken.json" in ln and "not analyzed" in ln for ln in ann)
    assert lines[-1] == "3 traces: 2 findings; 1 trace could not be analyzed"


def test_github_and_sarif_of_the_traces_document_without_the_cli(benchmarks):
    from tracedoc.ranks import analyze_inputs
    from tracedoc.render import formats, render

    doc = analyze_inputs([str(benchmarks)], jobs=1)
    assert formats("traces") == ["text", "json", "markdown", "github", "sarif"]
    log = json.loads(render(doc, "sarif"))
    assert len(log["runs"][0]["artifacts"]) == 3
    assert render(doc, "github").count("::error") >= 3


# -- 2. the overview of unrelated traces ----------------------------------------------------------


def test_overview_table_in_text_fits_80_columns(benchmarks):
    r = run("analyze", benchmarks)
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert all(len(ln) <= 80 for ln in lines), max(lines, key=len)
    at = next(i for i, ln in enumerate(lines) if ln.strip() == "overview")
    header, rows = lines[at + 1], lines[at + 3 : at + 7]
    assert all(c in header for c in ("trace", "top finding", "saving ms/step", "step ms"))
    names = [row.split()[0] for row in rows]
    assert names[0].startswith("resnet_base") and "…" in names[0]  # long names shortened in the middle
    assert names[1] == "resnet_pinned.json" and names[2].startswith("resnet_work") and names[3] == "broken.json"
    base, pinned, workers, broken = rows
    assert "TD101 dataloader-stall" in workers and "0.10 (10%)" in workers and workers.rstrip().endswith("1.00")
    assert "TD101 dataloader-stall" in base and "0.40 (40%)" in base
    assert "no findings" in pinned and "not analyzed (failed)" in broken
    assert lines[-1] == "3 traces: 2 findings; 1 trace could not be analyzed"


def test_overview_in_json_and_markdown(benchmarks):
    r = run("analyze", benchmarks, "--format", "json")
    d = json.loads(r.stdout)
    assert list(d)[:6] == ["schema_version", "kind", "tool", "inputs", "traces", "overview"]
    rows = {Path(o["path"]).name: o for o in d["overview"]}
    w = rows["resnet_workers.pt.trace.json.gz"]
    assert w["top_finding"] == {"code": "TD101", "name": "dataloader-stall", "severity": "error"}
    assert w["saving_ms"] == pytest.approx(0.1, abs=0.01) and w["step_time_ms"] == pytest.approx(1.0)
    assert w["saving_share"] == pytest.approx(0.1, abs=0.01) and w["findings"] == 1 and w["error"] is None
    assert rows["resnet_pinned.json"]["top_finding"] is None and rows["resnet_pinned.json"]["saving_ms"] is None
    assert rows["broken.json"]["error"] and rows["broken.json"]["step_time_ms"] is None
    # derived data: the document reads back without it
    from tracedoc.report.ranks import MultiTraceReport

    assert len(MultiTraceReport.from_dict(d).traces) == 3
    md = run("analyze", benchmarks, "--format", "markdown").stdout
    assert "| trace | top finding | saving (ms/step) | step time (ms) |" in md
    assert "| `resnet_workers.pt.trace.json.gz` | TD101 dataloader-stall | 0.10 (10%) | 1.00 |" in md


def test_overview_escapes_trace_names(tmp_path):
    from tracedoc.render.overview import overview_markdown
    from tracedoc.report.ranks import MultiTraceReport, RankEntry

    mt = MultiTraceReport(inputs=["d"], traces=[], failed=[RankEntry(path="d/a|b`\x1b[31m.json", error="x|y")])
    md = "\n".join(overview_markdown(mt))
    assert "\x1b" not in md and "a\\|b" in md


# -- 3. ** globs ----------------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path):
    t = tmp_path / "runs"
    (t / "a").mkdir(parents=True)
    (t / "b" / "deep").mkdir(parents=True)
    (t / ".hidden").mkdir()
    dataloader_bound().write(t / "top.pt.trace.json")
    dataloader_bound().write(t / "a" / "one.pt.trace.json.gz", gz=True)
    dataloader_bound().write(t / "b" / "deep" / "two.pt.trace.json.gz", gz=True)
    dataloader_bound().write(t / ".hidden" / "no.pt.trace.json.gz", gz=True)
    (t / "a" / "notes.txt").write_text("x")
    os.mkfifo(t / "a" / "fifo.pt.trace.json.gz")
    (t / "b" / "loop").symlink_to(t)  # a link loop: never followed
    return t


def test_double_star_glob_is_recursive_and_keeps_the_glob_rules(tree):
    found = discover([f"{tree}/**/*.pt.trace.json.gz"])
    assert [Path(f).relative_to(tree).as_posix() for f in found.files] == [
        "a/one.pt.trace.json.gz",
        "b/deep/two.pt.trace.json.gz",
    ]
    skipped = {Path(p).relative_to(tree).as_posix(): why for p, why in found.skipped}
    assert skipped == {"a/fifo.pt.trace.json.gz": "a FIFO", "b/loop": "symlink to a folder (** does not follow them)"}
    # a bare ** takes every file below (its folders are not matches)
    names = [Path(f).name for f in discover([f"{tree}/**"]).files]
    assert names == ["one.pt.trace.json.gz", "two.pt.trace.json.gz", "top.pt.trace.json"]
    # a pattern that names the hidden folder reaches it
    assert [Path(f).name for f in discover([f"{tree}/.hidden/**/*.gz"]).files] == ["no.pt.trace.json.gz"]


def test_double_star_glob_relative_and_limits(tree, monkeypatch):
    monkeypatch.chdir(tree.parent)
    assert discover(["runs/**/two.*"]).files == ["runs/b/deep/two.pt.trace.json.gz"]
    with pytest.raises(TraceLoadError, match="no file matches this pattern"):
        discover(["runs/**/nothing*.json"])
    monkeypatch.setattr(discover_mod, "MAX_GLOB_FOLDERS", 2)
    with pytest.raises(TraceLoadError, match=r"\*\* walks more than 2 folders"):
        discover(["runs/**/*.json"])


def test_double_star_glob_from_the_cli(tree):
    r = run("analyze", f"{tree}/**/*.pt.trace.json*", "-f", "json")
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    assert d["kind"] == "multi-trace" and len(d["traces"]) == 3
    assert "skipped 2" in r.stderr and "a FIFO" in r.stderr and len(r.stderr.splitlines()) == 1


# -- 4. TensorBoard log directories ---------------------------------------------------------------


@pytest.fixture
def logdir(tmp_path):
    root = tmp_path / "tb"
    old = root / "plugins" / "profile" / "2024_01_01_10_00_00"
    new = root / "plugins" / "profile" / "2024_02_01_10_00_00"
    old.mkdir(parents=True)
    new.mkdir(parents=True)
    dataloader_bound(dl_us=400.0).write(new / "host_1.1700000000.pt.trace.json.gz", gz=True)
    dataloader_bound(dl_us=10.0).write(old / "host_1.1600000000.pt.trace.json.gz", gz=True)
    t = time.time()
    os.utime(old / "host_1.1600000000.pt.trace.json.gz", (t - 100, t - 100))
    return root


def test_tensorboard_logdir_reads_the_newest_run_and_says_so(logdir):
    run_dir, note = tensorboard_run(logdir)
    assert run_dir.name == "2024_02_01_10_00_00"  # its trace was written last
    assert note and "2 runs" in note and "2024_01_01_10_00_00" in note  # the other one named


def test_tensorboard_logdir_from_the_cli(logdir):
    newest = logdir / "plugins" / "profile" / "2024_02_01_10_00_00" / "host_1.1700000000.pt.trace.json.gz"
    os.utime(newest, None)  # written last: the newest run
    r = run("analyze", logdir, "-f", "json")
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    assert [t["path"] for t in d["traces"]] == [str(newest)] and d["skipped"] == []
    assert d["notes"][0].startswith(f"{logdir}: TensorBoard log directory with 2 runs; read the newest, 2024_02_01")
    assert r.stderr.splitlines() == [f"tracedoc: warning: {d['notes'][0]}"]
    # the plugins/profile folder itself is a log of runs too; a run folder is a plain folder
    assert tensorboard_run(logdir / "plugins" / "profile")[0] == newest.parent
    assert tensorboard_run(newest.parent) is None


def test_trace_handler_layout_is_a_plain_folder(tmp_path):
    """tensorboard_trace_handler writes LOGDIR/<worker>.<ts>.pt.trace.json: read as it is."""
    d = tmp_path / "log"
    d.mkdir()
    dataloader_bound().write(d / "host_7.1700000000123.pt.trace.json")
    (d / "plugins" / "profile" / "r").mkdir(parents=True)
    assert tensorboard_run(d) is None
    found = discover([str(d)])
    assert [Path(f).name for f in found.files] == ["host_7.1700000000123.pt.trace.json"]


def test_a_logdir_with_one_run_needs_no_note(logdir):
    import shutil

    shutil.rmtree(logdir / "plugins" / "profile" / "2024_01_01_10_00_00")
    run_dir, note = tensorboard_run(logdir)
    assert run_dir.name == "2024_02_01_10_00_00" and note is None
    assert [Path(f).name for f in discover([str(logdir)]).files] == ["host_1.1700000000.pt.trace.json.gz"]


# -- 5. another profiler's output: its format named ---------------------------------------------


@pytest.mark.parametrize(
    "name,data,what",
    [
        ("run.nsys-rep", b"NSYS\x00\x01binary", "Nsight Systems report (.nsys-rep)"),
        ("run.qdrep", b"\x00\x01binary", "Nsight Systems report (.qdrep)"),
        ("run.sqlite", b"SQLite format 3\x00" + b"\x00" * 100, "Nsight Systems SQLite export (.sqlite)"),
        ("export.db", b"SQLite format 3\x00" + b"\x00" * 100, "SQLite database"),
        ("host.xplane.pb", b"\x0a\x05hello", "XPlane profile (.xplane.pb, TensorFlow/JAX profiler)"),
    ],
)
def test_other_profiler_outputs_are_named(tmp_path, name, data, what):
    p = tmp_path / name
    p.write_bytes(data)
    r = run("analyze", p)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"tracedoc: error: {p}: {what}: tracedoc reads PyTorch Profiler (Kineto) JSON traces; "
        "record one with torch.profiler (export_chrome_trace or tensorboard_trace_handler)"
    ]


def test_an_sqlite_stream_is_named_and_a_folder_says_what_it_skipped(tmp_path):
    p = tmp_path / "x.bin"
    p.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    with open(p, "rb") as fh:
        r = run("analyze", "-", stdin=fh)
    assert r.returncode == 2 and r.stderr.startswith("tracedoc: error: <stdin>: SQLite database: tracedoc reads")
    d = tmp_path / "only"
    d.mkdir()
    (d / "a.nsys-rep").write_bytes(b"NSYS")
    r = run("analyze", d)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    assert "a.nsys-rep (Nsight Systems report (.nsys-rep), not a Kineto JSON trace)" in r.stderr


def test_a_json_trace_is_not_mistaken_for_sqlite(tmp_path):
    """A stream's first byte decides nothing until the SQLite magic can be told apart."""
    from tracedoc.load.source import read_trace_bytes

    p = dataloader_bound().write(tmp_path / "t.json")
    assert bytes(read_trace_bytes(p)[:1]) == b"{"
    q = tmp_path / "s.json"
    q.write_bytes(b"SQLite")  # a prefix of the magic, then the end: not JSON, said by the parser
    with pytest.raises(TraceLoadError):
        from tracedoc.load import load

        load(str(q))
