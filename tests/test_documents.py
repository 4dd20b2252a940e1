"""The documents (issue "One road in, one document model through, one door out"): ``Report``,
``Finding``, ``Fix``, ``Skipped`` and ``AlsoTrue`` in :mod:`tracedoc.report.model`, each with
``to_dict`` and a ``from_dict`` that reverses it exactly, and ``Severity``, ordered by
importance rather than by its strings."""

from __future__ import annotations

import json
import operator
import pickle
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, real_trace
from helpers import not_plain_json, through_json

import tracedoc.engine as engine
import tracedoc.engine.claims as claims
import tracedoc.engine.rules as rules
from tracedoc.errors import TracedocError
from tracedoc.pipeline import analyze
from tracedoc.report.model import SCHEMA_VERSION, AlsoTrue, Finding, Fix, Report, Severity, Skipped
from tracedoc.settings import Settings

#: Every trace the suite reads: the real traces in fixtures/ and the calibration pairs.
TRACES = sorted(FIXTURES.glob("*.json.gz")) + sorted(FIXTURES.glob("calibration/*/*.pt.trace.json.gz"))
#: One of each kind, named so a checkout that lost them fails here rather than testing less.
KINDS = [
    "v100_resnet50_workers0.pt.trace.json.gz",  # GPU training, DataLoader-bound
    "v100_ddp_memory_events.pt.trace.json.gz",  # multi-stream DDP, memory events
    "h100_timesformer_inference.pt.trace.json.gz",  # inference
    "mi300x_sglang_qwen3_prefill_decode.pt.trace.json.gz",  # AMD serving
    "cpu_only_gloo.pt.trace.json.gz",  # CPU only
    "cpu_resnet18_baseline_img32.pt.trace.json.gz",  # our own CPU recording
    "legacy_computeproperties.json.gz",  # an old trace format
]


def test_fixture_list_is_whole():
    names = {p.name for p in TRACES}
    assert all(real_trace(k) for k in KINDS) and set(KINDS) <= names
    assert len(TRACES) >= 20


@pytest.mark.parametrize("path", TRACES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_report_round_trip_on_real_traces(path: Path):
    r = analyze(path, Settings())
    d = r.to_dict()
    assert not_plain_json(d) == []
    back = Report.from_dict(through_json(d))
    assert back == r
    assert back.to_dict() == d
    assert all(type(f.severity) is Severity for f in back.findings)


@pytest.mark.parametrize(
    "name",
    [
        "h100_vit_nsfw_inference.pt.trace.json.gz",
        "mi300x_bert_small_inference.pt.trace.json.gz",
        "v100_ddp_memory_events.pt.trace.json.gz",
    ],
)
def test_round_trip_keeps_overlaps(name: str):
    # without floors a capped finding stays ranked, with the codes that were granted its time first
    r = analyze(real_trace(name), Settings(min_saving_ms=0.0, min_saving_share=0.0))
    capped = [f for f in r.findings if f.overlaps]
    assert capped, "the fixture no longer has a capped finding: pick another"
    d = r.to_dict()
    assert [f["overlaps"] for f in d["findings"] if f["overlaps"]] == [list(f.overlaps) for f in capped]
    back = Report.from_dict(through_json(d))
    assert back == r and [f.overlaps for f in back.findings if f.overlaps] == [f.overlaps for f in capped]


def test_report_pickles():
    r = analyze(real_trace("mi250_toy_train.pt.trace.json.gz"), Settings())
    assert pickle.loads(pickle.dumps(r)) == r


# ---- Severity ---------------------------------------------------------------------------------


def test_severity_orders_by_importance_not_alphabet():
    info, warning, error = Severity.INFO, Severity.WARNING, Severity.ERROR
    # alphabetically "error" < "info" < "warning": the enum must not fall back to that
    assert sorted([error, info, warning]) == [info, warning, error]
    assert sorted([warning, error, info], reverse=True) == [error, warning, info]
    assert max([info, error, warning]) is error and min([warning, error, info]) is info
    assert info < warning < error and error > warning > info
    assert error >= error and info <= info and not error < info and not info > error
    assert [s.rank for s in Severity] == [0, 1, 2]
    assert Severity.most_severe_first() == (error, warning, info)


def test_severity_is_its_string():
    assert Severity("error") == "error" and Severity("error") is Severity.ERROR
    assert str(Severity.WARNING) == "warning" and f"{Severity.INFO}" == "info"
    assert json.dumps({"s": Severity.ERROR}) == '{"s": "error"}'
    assert {"error": 1}[Severity.ERROR] == 1 and hash(Severity.INFO) == hash("info")
    assert rules.SEVERITIES == ("info", "warning", "error")


def test_severity_against_plain_strings_reads_them_as_severities():
    assert Severity.WARNING < "error" and Severity.WARNING > "info"
    assert "error" > Severity.WARNING and "info" <= Severity.INFO  # a str on the left too
    assert not Severity.ERROR < "info"  # alphabetically it would be


@pytest.mark.parametrize("other", ["zzz", "", "Error", 1, 2.0, None, object()])
def test_severity_refuses_to_order_against_other_values(other):
    for op in (operator.lt, operator.le, operator.gt, operator.ge):
        with pytest.raises(TypeError):
            op(Severity.ERROR, other)
        with pytest.raises(TypeError):
            op(other, Severity.ERROR)
    if not isinstance(other, str):
        assert Severity.ERROR.__lt__(other) is NotImplemented
    assert Severity.ERROR != other


def test_finding_severity_is_a_severity():
    f = Finding("X1", "x", "warning", "m", 1.0, "", {}, Fix("f", "safe"))
    assert f.severity is Severity.WARNING
    with pytest.raises(ValueError):
        Finding("X1", "x", "fatal", "m", 1.0, "", {}, Fix("f", "safe"))


def test_rules_and_ranking_use_severity():
    assert all(type(r.severity) is Severity for r in rules.builtin_rules())
    fix = Fix("f", "safe")
    same = [
        Finding(c, c.lower(), s, "", 5.0, "", {}, fix) for c, s in (("A1", "info"), ("B1", "error"), ("C1", "warning"))
    ]
    assert [f.code for f in engine.rank_findings(same)] == ["B1", "C1", "A1"]


# ---- from_dict -------------------------------------------------------------------------------


def _report(**over: Any) -> Report:
    fields: dict[str, Any] = dict(
        trace={"path": "t.json", "n_steps": 2, "device": None, "devices": []},
        signals={"step_time_ms": 10.0, "has_gpu": False, "idle_ms": None},
        signals_unavailable={"idle_ms": "no GPU"},
        units={"step_time_ms": "ms", "has_gpu": "bool", "idle_ms": "ms"},
        steps=[{"step": 1, "step_time_ms": 10.0}],
        findings=[FINDING],
        skipped=[Skipped("TD301", "no-tc", "needs gpu: no value")],
        rules_evaluated=["TD101", "TD301"],
        scopes={"step_time_ms": "steps"},
        idle_ledger={"cuda:0": {"host_wait": 1.5}},
        also_true=[ALSO],
        notes=["a note"],
        recoverable={"ms": 2.5, "basis": "replay", "findings": ["TD101"], "not_replayed": []},
    )
    fields.update(over)
    return Report(**fields)


FIX = Fix("DataLoader(num_workers=4)", "unsafe", ("num_workers", "pin_memory"), replay="dataloader")
FINDING = Finding(
    "TD101",
    "dataloader-stall",
    Severity.ERROR,
    "DataLoader 40%",
    2.5,
    "replayed",
    {"dataloader_ms": 4.0, "flag": True, "none": None, "rows": [{"name": "x", "ms": 1.0}]},
    FIX,
    claims=("idle:host_wait", "step"),
    uncapped_saving_ms=6.0,
    overlaps=("TD104", "TD105"),
    replayed_saving_ms=2.5,
    slice_saving_ms=4.0,
    replayed_low_ms=1.25,
)
ALSO = AlsoTrue("TD104", "blocking-sync", "TD101 dataloader-stall", "claimed first", 0.01, 3.0)


@pytest.mark.parametrize(
    "doc",
    [
        FIX,
        Fix("s", "safe"),
        FINDING,
        Finding("A1", "a", "info", "", None, "", {}, Fix("f", "display-only")),
        Skipped("TD301", "no-tc", "needs gpu: no value"),
        ALSO,
        AlsoTrue("TD105", "x", "below floor", "small"),
    ],
    ids=lambda d: type(d).__name__,
)
def test_documents_round_trip(doc):
    d = doc.to_dict()
    assert not_plain_json(d) == []
    back = type(doc).from_dict(through_json(d))
    assert back == doc and back.to_dict() == d
    if isinstance(doc, Finding):
        assert back.overlaps == doc.overlaps and isinstance(back.claims, tuple) and isinstance(back.overlaps, tuple)
        assert back.fix.knobs == doc.fix.knobs and back.fix.replay == doc.fix.replay


def test_finding_dict_carries_overlaps():
    d = FINDING.to_dict()
    assert d["overlaps"] == ["TD104", "TD105"] and d["severity"] == "error" and type(d["severity"]) is str
    assert d["fix"] == {
        "summary": "DataLoader(num_workers=4)",
        "safety": "unsafe",
        "knobs": ["num_workers", "pin_memory"],
        "replay": "dataloader",
    }


def test_hand_built_report_round_trips():
    r = _report()
    d = r.to_dict()
    assert d["schema_version"] == SCHEMA_VERSION == 2
    assert Report.from_dict(through_json(d)) == r
    assert Report.from_dict(through_json(d)).to_dict() == d
    assert Report.from_dict(through_json(_report(recoverable=None, also_true=[]).to_dict())).recoverable is None


def test_from_dict_ignores_the_tool_block():
    d = _report().to_dict()
    d["tool"] = {"name": "tracedoc", "version": "0.0.1-elsewhere"}
    assert Report.from_dict(d) == _report()
    del d["tool"]
    assert Report.from_dict(d) == _report()


def test_from_dict_reads_an_earlier_version_2_report():
    # a version-2 report written before the additive fields: none of them, and no finding overlaps
    d = through_json(_report().to_dict())
    for k in ("scopes", "idle_ledger", "notes", "recoverable"):
        del d[k]
    for k in ("overlaps", "replayed_low_ms", "slice_saving_ms", "replayed_saving_ms"):
        del d["findings"][0][k]
    del d["findings"][0]["fix"]["replay"]
    r = Report.from_dict(d)
    f = r.findings[0]
    assert (r.scopes, r.idle_ledger, r.notes, r.recoverable) == ({}, {}, [], None)
    assert f.overlaps == () and f.replayed_saving_ms is None and f.fix.replay is None
    assert f.severity is Severity.ERROR and f.fix.knobs == ("num_workers", "pin_memory")


@pytest.mark.parametrize("version", [1, 3, "2", 2.5, None, True])
def test_from_dict_rejects_another_schema_version(version):
    d = _report().to_dict()
    d["schema_version"] = version
    with pytest.raises(TracedocError, match="schema_version") as exc:
        Report.from_dict(d)
    assert "\n" not in str(exc.value)


def test_from_dict_rejects_a_document_without_version():
    d = _report().to_dict()
    del d["schema_version"]
    with pytest.raises(TracedocError, match="no schema_version") as exc:
        Report.from_dict(d)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"schema_version": 2},
        {**_report().to_dict(), "findings": [{"code": "X1"}]},
        {**_report().to_dict(), "findings": "none"},
        {**_report().to_dict(), "findings": [{**FINDING.to_dict(), "severity": "fatal"}]},
    ],
    ids=["list", "empty", "finding-without-fields", "findings-not-a-list", "bad-severity"],
)
def test_from_dict_rejects_malformed_reports(doc):
    with pytest.raises(TracedocError) as exc:
        Report.from_dict(doc)
    assert "\n" not in str(exc.value)


def test_old_homes_still_export_the_documents():
    assert rules.Finding is Finding and rules.Fix is Fix and rules.Skipped is Skipped
    assert claims.AlsoTrue is AlsoTrue
    assert engine.Finding is Finding and engine.Skipped is Skipped and engine.Severity is Severity
