"""The stored report (tracedoc/cache.py ``ReportStore``): an ``analyze`` that changes nothing
reads the report back instead of loading the trace (issue 24's warm path), and anything that
could change the report -- the trace's bytes, the settings, a rule file, the code -- makes it
analyse again."""

from __future__ import annotations

import importlib
import json
import os
import shutil

import pytest
from conftest import FIXTURES
from tracebuilder import budget_rule_toml
from typer.testing import CliRunner

from tracedoc import cache as cache_mod
from tracedoc import settings as settings_mod
from tracedoc.cache import FrameCache, ReportStore, remove_entry
from tracedoc.cli import app
from tracedoc.settings import Settings

runner = CliRunner()
REAL = FIXTURES / "v100_resnet50_workers0.pt.trace.json.gz"


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEDOC_CACHE_MIN_BYTES", "0")
    monkeypatch.setenv("TRACEDOC_NO_CONFIG", "1")
    trace = tmp_path / "t.json.gz"
    shutil.copy(REAL, trace)
    return trace, tmp_path / "cache"


def _run(trace, cdir, *extra):
    r = runner.invoke(app, ["analyze", str(trace), "--cache-dir", str(cdir), "--exit-zero", *extra])
    assert r.exit_code == 0, r.output
    return r.stdout


def _loads(monkeypatch):
    """Record calls of the loader (the CLI imports it when it analyses; through the frame cache
    one load is two calls)."""
    calls = []
    mod = importlib.import_module("tracedoc.load")  # the package; tracedoc.load is also the function
    real = mod.load

    def counting(*a, **k):
        calls.append(a[0])
        return real(*a, **k)

    monkeypatch.setattr(mod, "load", counting)
    return calls


def test_an_unchanged_analysis_reads_the_stored_report(setup, monkeypatch):
    trace, cdir = setup
    fresh = {f: _run(trace, cdir, "--no-cache", "-f", f) for f in ("json", "text", "sarif")}
    calls = _loads(monkeypatch)
    first = _run(trace, cdir, "-f", "json")  # analyses, stores frames, signals and report
    assert calls
    n = len(calls)
    assert (cdir / "v3").is_dir() and any(p.name == ReportStore.NAME for p in (cdir / "v3").rglob("*"))
    for f in ("json", "text", "sarif"):
        assert _run(trace, cdir, "-f", f) == fresh[f]  # every format renders the stored report alike
    assert len(calls) == n  # none of them loaded the trace
    assert first == fresh["json"]


def test_the_report_names_the_trace_as_given(setup, monkeypatch):
    trace, cdir = setup
    _run(trace, cdir, "-f", "json")
    monkeypatch.chdir(trace.parent)
    calls = _loads(monkeypatch)
    out = json.loads(_run(f"./{trace.name}", cdir, "-f", "json"))
    assert calls == [] and out["trace"]["path"] == f"./{trace.name}"


@pytest.mark.parametrize(
    "change",
    [
        ["--select", "TD101"],
        ["--min-saving-ms", "0.5"],
        ["--max-trace-bytes", "512M"],
    ],
)
def test_other_settings_analyse_again(setup, monkeypatch, change):
    trace, cdir = setup
    _run(trace, cdir, "-f", "json")
    calls = _loads(monkeypatch)
    out = _run(trace, cdir, "-f", "json", *change)
    assert calls
    assert out == _run(trace, cdir, "--no-cache", "-f", "json", *change)


def test_a_changed_rule_file_analyses_again(setup, monkeypatch):
    trace, cdir = setup
    rules = trace.parent / "rules.toml"
    rules.write_text(budget_rule_toml(0))
    a = json.loads(_run(trace, cdir, "-f", "json", "--rules", str(rules)))
    assert "CI1" in [f["code"] for f in a["findings"]]
    calls = _loads(monkeypatch)
    rules.write_text(budget_rule_toml(10**9))  # same path, other bytes
    settings_mod._rules.cache_clear()  # rules load once per settings in a process: a new CLI run
    b = json.loads(_run(trace, cdir, "-f", "json", "--rules", str(rules)))
    assert calls and "CI1" not in [f["code"] for f in b["findings"]]


def test_changed_trace_bytes_with_the_same_size_and_mtime_analyse_again(setup, monkeypatch):
    trace, cdir = setup
    _run(trace, cdir, "-f", "json")
    st = os.stat(trace)
    data = bytearray(trace.read_bytes())
    data[-9] ^= 0xFF  # the gzip trailer's CRC: the file no longer reads as a trace
    trace.write_bytes(bytes(data))
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(trace).st_size == st.st_size and os.stat(trace).st_mtime_ns == st.st_mtime_ns
    r = runner.invoke(app, ["analyze", str(trace), "--cache-dir", str(cdir), "-f", "json"])
    assert r.exit_code == 2 and "t.json.gz" in r.output  # the damaged bytes are read, not the old report


def test_other_code_analyses_again(setup, monkeypatch):
    trace, cdir = setup
    _run(trace, cdir, "-f", "json")
    monkeypatch.setattr(cache_mod, "package_code_hash", lambda: "another version")
    calls = _loads(monkeypatch)
    _run(trace, cdir, "-f", "json")
    assert calls


@pytest.mark.parametrize("bad", [b"{not json", b'{"stamp": {}, "report": {}}', b'{"stamp": 1, "report": []}'])
def test_a_damaged_report_file_is_ignored_and_replaced(setup, monkeypatch, bad):
    trace, cdir = setup
    fresh = _run(trace, cdir, "-f", "json")
    stored = next((cdir / "v3").rglob(ReportStore.NAME))
    stored.write_bytes(bad)
    calls = _loads(monkeypatch)
    assert _run(trace, cdir, "-f", "json") == fresh
    assert calls
    assert json.loads(stored.read_bytes())["report"]["schema_version"]  # written again


def test_a_report_with_a_forged_stamp_but_other_bytes_is_not_used(setup, monkeypatch):
    trace, cdir = setup
    _run(trace, cdir, "-f", "json")
    stored = next((cdir / "v3").rglob(ReportStore.NAME))
    doc = json.loads(stored.read_bytes())
    doc["stamp"]["content"] = "0" * 64
    stored.write_text(json.dumps(doc))
    calls = _loads(monkeypatch)
    _run(trace, cdir, "-f", "json")
    assert calls


def test_the_store_is_part_of_the_entry_cache_clear_removes(setup):
    trace, cdir = setup
    _run(trace, cdir, "-f", "json")
    entry = next((cdir / "v3").rglob(ReportStore.NAME)).parent
    (entry / f"{ReportStore.NAME}.tmp123").write_bytes(b"half")
    assert remove_entry(entry) and not entry.exists()


def test_no_store_for_unreadable_rule_paths_or_uncacheable_traces(tmp_path):
    c = FrameCache(tmp_path / "c", min_bytes=0)
    trace = tmp_path / "t.json.gz"
    shutil.copy(REAL, trace)
    assert c.reports(trace, Settings()) is not None
    assert c.reports(trace, Settings(rule_paths=(str(tmp_path / "missing.toml"),))) is None
    assert c.reports("-", Settings()) is None
    assert FrameCache(tmp_path / "c").reports(trace, Settings()) is None  # below the size to cache


_IMPORTS_AFTER = r"""
import os, sys
from tracedoc.cli import main
real_exit = os._exit
def done(code):
    sys.stderr.write("\nIMPORTED " + " ".join(m for m in ("pandas", "pyarrow", "tracedoc.signals") if m in sys.modules) + "\n")
    sys.stderr.flush()
    real_exit(code)
os._exit = done
sys.argv = ["tracedoc", "analyze", *sys.argv[1:]]
main()
"""


def test_a_stored_report_is_rendered_without_pandas_or_the_signals(setup):
    # issue 24: the warm path must not import what it does not need (pandas alone is 0.3-0.4 s)
    import subprocess
    import sys

    trace, cdir = setup
    args = [str(trace), "--cache-dir", str(cdir), "-f", "json", "--exit-zero"]
    env = {**os.environ, "TRACEDOC_CACHE_MIN_BYTES": "0", "TRACEDOC_NO_CONFIG": "1"}

    def imported() -> str:
        r = subprocess.run([sys.executable, "-c", _IMPORTS_AFTER, *args], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        return r.stderr.rsplit("IMPORTED", 1)[1].strip()

    assert "pandas" in imported()  # the first run analyses
    assert imported() == ""  # the second reads the stored report


def test_a_rule_folder_is_hashed_as_the_engine_lists_it(tmp_path):
    # a folder's *.toml files only, as tracedoc.tomlfile.rule_files lists them: a change to
    # another file of the folder leaves the stored report valid, a change to a rule does not
    folder = tmp_path / "rules"
    folder.mkdir()
    (folder / "r.toml").write_text(budget_rule_toml(0))
    (folder / "notes.txt").write_text("one")
    c = FrameCache(tmp_path / "c", min_bytes=0)
    trace = tmp_path / "t.json.gz"
    shutil.copy(REAL, trace)
    settings = Settings(rule_paths=(str(folder),))
    first = c.reports(trace, settings).stamp["inputs"]
    (folder / "notes.txt").write_text("two")
    assert c.reports(trace, settings).stamp["inputs"] == first
    (folder / "r.toml").write_text(budget_rule_toml(1))
    assert c.reports(trace, settings).stamp["inputs"] != first
    os.mkfifo(folder / "fifo.toml")  # not a regular file: no store, and no read that blocks
    assert c.reports(trace, settings) is None


def test_other_library_versions_analyse_again(setup, monkeypatch):
    trace, cdir = setup
    _run(trace, cdir, "-f", "json")
    versions = {**cache_mod.library_versions(), "pandas": "9.9"}
    monkeypatch.setattr(cache_mod, "library_versions", lambda: versions)
    calls = _loads(monkeypatch)
    _run(trace, cdir, "-f", "json")
    assert calls


def test_library_versions_import_nothing():
    import subprocess
    import sys

    code = "import sys; from tracedoc.cache import library_versions as v; d = v(); print(d['numpy'], 'pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0].count(".") >= 1 and out[1] == "False"


def _parts(trace, cdir) -> dict[str, str]:
    """``tracedoc cache info TRACE``'s part lines as ``{part: status}``."""
    r = runner.invoke(app, ["cache", "info", str(trace), "--cache-dir", str(cdir)])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    at = lines.index(f"{trace}:")
    return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in lines[at + 1 :])}


def test_cache_info_says_what_an_unchanged_analyze_would_read(setup, monkeypatch):
    trace, cdir = setup
    assert _parts(trace, cdir) == {"frames": "none stored"}
    _run(trace, cdir, "-f", "json")
    parts = _parts(trace, cdir)
    assert parts["frames"] == "current" and parts["report"] == "current"
    assert parts["signals"].startswith("current (") and parts["signals"].endswith(" values)")
    # and "current" is what the next plain run does: it reads the report, loading nothing
    calls = _loads(monkeypatch)
    _run(trace, cdir, "-f", "json")
    assert calls == []
    # another selection replaces the stored report: the plain run's would not be read now
    _run(trace, cdir, "-f", "json", "--select", "TD101")
    assert _parts(trace, cdir)["report"] == "stored for other settings or rule files"


def test_cache_info_checks_against_the_settings_analyze_uses(setup, monkeypatch):
    """``default_settings`` must be the settings a plain ``analyze`` resolves, floors included,
    or ``cache info`` would call a stored report stale that the run reads (the CLI passes its
    option defaults, 0.05 ms and 1%, not None)."""
    from tracedoc.cli.analyze import default_settings

    trace, cdir = setup
    seen = []
    real = FrameCache.reports
    monkeypatch.setattr(FrameCache, "reports", lambda self, p, s: seen.append(s) or real(self, p, s))
    _run(trace, cdir, "-f", "json")
    assert len(seen) == 1 and repr(seen[0]) == repr(default_settings(str(trace)))
    assert seen[0].min_saving_ms == 0.05 and seen[0].min_saving_share == 0.01


def test_cache_info_names_the_part_of_a_stamp_that_differs(setup, monkeypatch):
    trace, cdir = setup
    _run(trace, cdir, "-f", "json")
    (doc_path,) = (cdir / "v3").rglob(ReportStore.NAME)
    doc = json.loads(doc_path.read_text())
    now = doc["stamp"]["libraries"]["numpy"]
    doc["stamp"]["libraries"]["numpy"] = "9.9\x1b]0;owned\x07"  # a hostile cache file
    doc_path.write_text(json.dumps(doc))
    r = runner.invoke(app, ["cache", "info", str(trace), "--cache-dir", str(cdir)])
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert f"report:  stored for other library versions: numpy 9.9\\x1b]0;owned\\x07 (now {now})" in r.stdout
    doc["stamp"]["libraries"]["numpy"] = now
    doc["stamp"]["code"] = "0" * 32
    doc_path.write_text(json.dumps(doc))
    assert _parts(trace, cdir)["report"].startswith("stored by other code")
    doc_path.write_text("{not json")
    assert _parts(trace, cdir)["report"] == "none stored"  # unreadable is as good as none
    os.utime(trace, ns=(1, 1))
    assert _parts(trace, cdir) == {"frames": "stale: mtime_ns changed since it was written"}
    with open(trace, "ab") as fh:
        fh.write(b"\0")
    assert _parts(trace, cdir)["frames"] == "stale: mtime_ns, size changed since it was written"


def test_cache_info_on_what_is_never_cached(setup, monkeypatch):
    trace, cdir = setup
    monkeypatch.setenv("TRACEDOC_CACHE_MIN_BYTES", str(trace.stat().st_size + 1))
    assert _parts(trace, cdir) == {"frames": f"not cached: smaller than the cache's {trace.stat().st_size + 1:,} bytes"}
    assert _parts("-", cdir) == {"frames": "not cached: not a local regular file"}


def test_cache_info_knows_every_field_of_both_stamps(setup):
    """``cache info`` says "current" only when no field it knows differs, so it must know
    every field the stores stamp (a new one would otherwise read as current)."""
    trace, cdir = setup
    c = FrameCache(cdir, min_bytes=0)
    key = c.key(trace)
    known = {f for f, _ in cache_mod._STAMP_FIELDS}
    settings = Settings.resolve(str(trace))
    assert set(cache_mod.SignalStore(c, key, "x").stamp) <= known
    assert set(c.reports(trace, settings).stamp) | {"content"} <= known
