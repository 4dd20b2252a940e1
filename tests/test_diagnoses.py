"""The diagnoses of issue 8 owned here: single-tensor-optimizer (TD210), unfused-attention
(TD310), no-tensor-core-use (TD301) on every vendor, HIP [memory] events, MTIA traces.

Real-trace expectations (fires / must not fire) use the traces in fixtures/; the figures
behind them are checked against tests/golden/derive_diagnoses.py, a stdlib-only
re-derivation that never imports tracedoc (its output is tests/golden/diagnoses_figures.json).
Boundary cases live in the rule files' [[tests]]; tests/test_rules.py checks their `saving` values.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import pytest
from conftest import real_trace
from tracebuilder import V100, TraceBuilder

import tracedoc
from tracedoc.engine.rules import Finding, builtin_rules
from tracedoc.signals import SignalContext, SignalUnavailable
from tracedoc.signals.optimizer import FOREACH_HOST_REDUCTION
from tracedoc.signals.steps import complete_mask, step_windows

FIG = json.loads((Path(__file__).parent / "golden" / "diagnoses_figures.json").read_text())
GZ = ".pt.trace.json.gz"


@cache
def report(name: str):
    return tracedoc.analyze(real_trace(name + GZ))


@cache
def context(name: str) -> SignalContext:
    return SignalContext(tracedoc.load(real_trace(name + GZ)))


def names(name: str) -> set[str]:
    return {f.name for f in report(name).findings}


def finding(name: str, rule: str):
    return next(f for f in report(name).findings if f.name == rule)


def complete_steps(name: str) -> list[str]:
    c = context(name)
    return [str(int(s)) for s in step_windows(c)["step"].to_numpy()[complete_mask(c)]]


def mean_over_complete(section: str, name: str, key: str) -> float:
    per = FIG[section][name]
    steps = complete_steps(name)
    assert steps and all(s in per for s in steps), (steps, sorted(per))
    return sum(per[s][key] for s in steps) / len(steps)


# ---- real traces: fires / must not fire ------------------------------------------------


@pytest.mark.parametrize("name", ["v100_ddp_memory_events", "v100_resnet50_workers0", "v100_resnet50_workers4"])
def test_single_tensor_optimizer_fires(name):
    assert "single-tensor-optimizer" in names(name)
    f = finding(name, "single-tensor-optimizer")
    assert f.code == "TD210" and f.fix.safety == "safe" and "foreach=True" in f.fix.summary


@pytest.mark.parametrize("name", ["v100_resnet50_ddp_gpu_bound", "mi250_toy_train"])
def test_single_tensor_optimizer_silent_with_foreach(name):
    # both traces run SGD through _foreach_* ops (multi_tensor_apply_kernel)
    assert "single-tensor-optimizer" not in names(name)
    assert report(name).signals["optimizer_multi_tensor_share"] == 1.0


def test_unfused_attention_fires_on_timesformer():
    assert "unfused-attention" in names("h100_timesformer_inference")
    f = finding("h100_timesformer_inference", "unfused-attention")
    s = report("h100_timesformer_inference").signals
    assert f.code == "TD310"
    # the slice: the kernel time a fused kernel removes (its FLOPs at FlashAttention's share of the
    # H100's bf16 peak: about 8.4 ms of the 129.3 ms of softmax, bmm and score-scaling kernels)
    assert f.slice_saving_ms == pytest.approx(s["fused_attention_kernel_saving_ms"], abs=1e-3)
    assert 118 < f.slice_saving_ms < 123 and f.slice_saving_ms > s["eager_attention_ms"]
    # replayed: the attention kernels are on the path of the GPU work, so fusing them saves nearly
    # the kernel time removed (less where a kernel overlaps other work)
    assert 0.95 * f.slice_saving_ms <= f.replayed_saving_ms == f.estimated_saving_ms <= f.slice_saving_ms + 0.01
    assert f.evidence["fused_attention_model"][0]["basis"].startswith("FLOPs of QK^T and PV")
    assert f.evidence["top_eager_attention_kernels"][0]["part"] == "softmax"


@pytest.mark.parametrize(
    "name", ["h100_vit_nsfw_inference", "mi300x_bert_small_inference", "v100_resnet50_workers0", "mi250_toy_train"]
)
def test_unfused_attention_silent(name):
    assert "unfused-attention" not in names(name)


@pytest.mark.parametrize("name", ["h100_vit_nsfw_inference", "mi300x_bert_small_inference"])
def test_fused_attention_is_recognised(name):
    assert report(name).signals["fused_attention_kernel_share"] > 0.05


@pytest.mark.parametrize(
    "name",
    [
        "a100_alexnet_forward",
        "h100_timesformer_inference",
        "h100_vit_nsfw_inference",
        "mi300x_bert_small_inference",
        "mi300x_sglang_qwen3_prefill_decode",
        "mi300x_torch_compile_triton",
    ],
)
def test_no_tensor_core_use_silent(name):
    assert "no-tensor-core-use" not in names(name)


@pytest.mark.parametrize("name", ["v100_resnet50_workers0", "v100_resnet50_ddp_gpu_bound"])
def test_no_tensor_core_use_still_fires(name):
    assert "no-tensor-core-use" in names(name)


@pytest.mark.parametrize(
    "name",
    [
        "mi250_toy_train",
        "mi300x_bert_small_inference",
        "mi300x_sglang_qwen3_prefill_decode",
        "mi300x_torch_compile_triton",
    ],
)
def test_no_tensor_core_use_is_evaluated_on_amd(name):
    r = report(name)
    assert "no-tensor-core-use" not in {s.name for s in r.skipped}
    assert r.signals["has_tensor_cores"] is True
    assert r.signals["tensor_core_kernel_share"] > 0.25  # hipBLASLt MFMA GEMMs are matrix-core kernels


# ---- independent figures (tests/golden/derive_diagnoses.py) -----------------------------


@pytest.mark.parametrize(
    "name",
    ["v100_ddp_memory_events", "v100_resnet50_workers0", "v100_resnet50_workers4", "v100_resnet50_ddp_gpu_bound"],
)
def test_optimizer_figures(name):
    s = report(name).signals
    kernels = mean_over_complete("optimizer", name, "kernels")
    multi = mean_over_complete("optimizer", name, "multi_tensor_kernels")
    assert s["optimizer_kernels_per_step"] == pytest.approx(kernels)
    assert s["optimizer_single_tensor_kernels_per_step"] == pytest.approx(kernels - multi)
    assert s["optimizer_multi_tensor_share"] == pytest.approx(multi / kernels)
    single_ms = mean_over_complete("optimizer", name, "single_tensor_kernel_ms")
    assert s["optimizer_single_tensor_kernel_ms"] == pytest.approx(single_ms, abs=2e-3)


def test_optimizer_kernels_per_step_on_ddp_trace():
    # the headline figure: 404 per-parameter add_ kernels in every step of the DDP trace
    assert {v["kernels"] for v in FIG["optimizer"]["v100_ddp_memory_events"].values()} == {404}
    assert report("v100_ddp_memory_events").signals["optimizer_kernels_per_step"] == 404


def _optimizer_step_span_ms(name: str) -> float:
    """Mean length of the Optimizer.step# spans of a fixture, read with gzip + json alone."""
    with gzip.open(Path(__file__).parent.parent / "fixtures" / f"{name}.pt.trace.json.gz") as fh:
        events = json.load(fh)["traceEvents"]
    spans = [e["dur"] for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("Optimizer.step#")]
    return sum(spans) / len(spans) / 1000.0


def test_foreach_saving_factor_comes_from_the_traces():
    # TD210 claims the host time foreach removes: 95% on the two V100 ResNet-50 traces
    # (same model and optimizer; single-tensor in workers0, foreach in ddp_gpu_bound)
    single = _optimizer_step_span_ms("v100_resnet50_workers0")
    multi = _optimizer_step_span_ms("v100_resnet50_ddp_gpu_bound")
    assert 1 - multi / single == pytest.approx(FOREACH_HOST_REDUCTION, abs=0.01)
    rule = next(r for r in builtin_rules() if r.name == "single-tensor-optimizer")
    assert rule.claims[0] == "idle:optimizer_step"


@pytest.mark.parametrize(
    "name", ["h100_timesformer_inference", "h100_vit_nsfw_inference", "mi300x_bert_small_inference"]
)
def test_attention_figures(name):
    s = report(name).signals
    assert s["softmax_kernel_share"] == pytest.approx(mean_over_complete("attention", name, "softmax_share"), abs=1e-4)
    assert s["eager_attention_kernel_share"] == pytest.approx(
        mean_over_complete("attention", name, "eager_attention_share"), abs=1e-4
    )


def test_timesformer_softmax_share():
    # the headline figure: cunn_SoftMaxForward and friends are 44.4% of kernel time
    assert FIG["attention"]["h100_timesformer_inference"]["6"]["softmax_share"] == pytest.approx(0.444, abs=1e-3)
    assert report("h100_timesformer_inference").signals["softmax_kernel_share"] == pytest.approx(0.44416, abs=1e-4)


def test_amd_matrix_core_figures():
    s = report("mi250_toy_train").signals
    assert s["tensor_core_kernel_share"] == pytest.approx(
        mean_over_complete("matrix_core", "mi250_toy_train", "matrix_core_share"), abs=1e-4
    )
    # MI300X BERT: hipBLASLt MFMA GEMMs plus the Triton flash-attention kernel attn_fwd
    s = report("mi300x_bert_small_inference").signals
    mfma = mean_over_complete("matrix_core", "mi300x_bert_small_inference", "matrix_core_share")
    assert s["tensor_core_kernel_share"] == pytest.approx(mfma + s["fused_attention_kernel_share"], abs=1e-4)


def test_hip_memory_events_count():
    g = FIG["hip_memory"]["mi300x_bert_small_inference"]
    assert g["hip_events"] > 0
    s = report("mi300x_bert_small_inference").signals
    assert s["peak_memory_bytes"] == g["peak_allocated_bytes"]
    assert "low-gpu-memory-use" not in {x.name for x in report("mi300x_bert_small_inference").skipped}


# ---- savings: wall-clock, never more than the step -----------------------------------------


@pytest.mark.parametrize(
    "name,signal",
    [
        ("h100_timesformer_inference", "eager_attention_ms"),
        ("v100_ddp_memory_events", "optimizer_single_tensor_kernel_ms"),
        ("v100_resnet50_workers0", "tc_eligible_non_tc_ms"),
        ("v100_resnet50_ddp_gpu_bound", "tc_eligible_non_tc_ms"),
    ],
)
def test_kernel_time_claims_fit_in_the_step(name, signal):
    s = report(name).signals
    assert 0 < s[signal] <= s["step_time_ms"]


def _two_stream_gemms() -> TraceBuilder:
    """One 1000 µs step; two fp32 sgemm kernels of 600 µs on streams 7 and 8 overlap by 300 µs."""
    b = TraceBuilder([V100])
    b.step(1, 0, 1000)
    b.op("aten::mm", 10, 20)
    b.kernel("volta_sgemm_128x64_nn", 12, 100, 600, stream=7)
    b.op("aten::mm", 40, 20)
    b.kernel("volta_sgemm_128x64_nn", 42, 400, 600, stream=8)
    return b


def test_no_tensor_core_saving_is_a_union_across_streams(tmp_path):
    c = SignalContext(tracedoc.load(_two_stream_gemms().write(tmp_path / "t.json")))
    # union [100, 1000) = 0.9 ms (a sum of durations would say 1.2 ms, more than the 1.0 ms step)
    assert c.get("tc_eligible_non_tc_ms") == pytest.approx(0.9)
    assert c.get("tc_eligible_non_tc_ms") <= c.get("step_time_ms")


def getter(case):
    """Signal values of a rule's [[tests]] case; the others are unavailable."""
    values = dict(case.get("signals", {}))

    def get(name):
        if name in case.get("unavailable", []) or name not in values:
            raise SignalUnavailable("not in this case")
        return values[name]

    return get


@pytest.mark.parametrize("code", ["TD310", "TD301"])
def test_kernel_time_rules_claim_busy_time_and_say_how(code):
    rule = next(r for r in builtin_rules() if r.code == code)
    assert rule.claims == ("busy",)
    # replayed, with the kernel time the fix removes as its slice
    slice_signal = {"TD310": "fused_attention_kernel_saving_ms", "TD301": "tensor_core_kernel_saving_ms"}[code]
    assert "Replayed" in rule.saving_basis and slice_signal in rule.saving_basis
    assert rule.fix.replay is not None
    assert "The saving is an estimate, computed as" in rule.docs["what"]
    assert any(c.get("saving") is not None for c in rule.tests)


# ---- synthetic traces: the mechanisms ---------------------------------------------------


def _optimizer_trace(kernels: list[str], n_steps: int = 2) -> TraceBuilder:
    b = TraceBuilder([V100])
    for i in range(n_steps):
        t0 = i * 10_000
        b.step(i + 1, t0, 10_000)
        b.op("aten::mm", t0 + 10, 20)
        b.kernel("volta_sgemm_128x64_nn", t0 + 12, t0 + 100, 3000)
        b.op("Optimizer.step#SGD.step", t0 + 5000, 4000, cat="user_annotation")
        for j, name in enumerate(kernels):
            b.kernel(name, t0 + 5010 + 100 * j, t0 + 5020 + 100 * j, 10.0)
    return b


def test_single_tensor_optimizer_signals(tmp_path):
    c = SignalContext(
        tracedoc.load(_optimizer_trace(["vectorized_elementwise_kernel<AddFunctor>"] * 25).write(tmp_path / "a.json"))
    )
    assert c.get("optimizer_kernels_per_step") == 25
    assert c.get("optimizer_single_tensor_kernels_per_step") == 25
    assert c.get("optimizer_multi_tensor_share") == 0.0
    assert c.get("optimizer_single_tensor_kernel_ms") == pytest.approx(0.25)  # 25 disjoint 10 µs kernels
    assert c.get("optimizer_step_ms") == pytest.approx(4.0)
    rule = next(r for r in builtin_rules() if r.name == "single-tensor-optimizer")
    assert isinstance(rule.evaluate(c.get), Finding)


def test_optimizer_kernels_of_other_threads_do_not_count(tmp_path):
    b = _optimizer_trace(["vectorized_elementwise_kernel<AddFunctor>"] * 25, n_steps=1)
    b.tid = 200  # e.g. a DDP communication thread launching during the optimizer step
    b.kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 6000, 6100, 50.0)
    c = SignalContext(tracedoc.load(b.write(tmp_path / "t.json")))
    assert c.get("optimizer_kernels_per_step") == 25


def test_foreach_optimizer_does_not_fire(tmp_path):
    multi = ["void at::native::multi_tensor_apply_kernel<TensorListMetadata<2>, BinaryOpListAlphaFunctor>"] * 3
    c = SignalContext(tracedoc.load(_optimizer_trace(multi).write(tmp_path / "b.json")))
    assert c.get("optimizer_multi_tensor_share") == 1.0
    assert c.get("optimizer_single_tensor_kernels_per_step") == 0
    rule = next(r for r in builtin_rules() if r.name == "single-tensor-optimizer")
    assert rule.evaluate(c.get) is None


def _attention_trace(fused: bool) -> TraceBuilder:
    b = TraceBuilder([V100])
    b.step(1, 0, 2000)
    if fused:
        b.op("aten::_scaled_dot_product_efficient_attention", 10, 50)
        b.kernel("fmha_cutlassF_f16_aligned_64x64_rf_sm80", 20, 100, 900)
    else:
        b.op("aten::bmm", 10, 20)
        b.kernel("volta_h884gemm_64x64_ldg8_nn", 12, 100, 300)
        b.op("aten::_softmax", 40, 20)
        b.kernel("void at::native::cunn_SoftMaxForward<4, float>", 42, 400, 400)
        b.op("aten::bmm", 70, 20)
        b.kernel("volta_h884gemm_64x64_ldg8_nn", 72, 800, 300)
    b.op("aten::addmm", 100, 20)
    b.kernel("volta_h884gemm_128x128_ldg8_nn", 102, 1100, 500)
    return b


def test_eager_attention_signals(tmp_path):
    c = SignalContext(tracedoc.load(_attention_trace(fused=False).write(tmp_path / "e.json")))
    # kernel time 1500 µs: softmax 400, bmm 600, addmm 500
    assert c.get("softmax_kernel_share") == pytest.approx(400 / 1500)
    assert c.get("eager_attention_kernel_share") == pytest.approx(1000 / 1500)
    assert c.get("fused_attention_kernel_share") == 0.0
    assert c.get("eager_attention_ms") == pytest.approx(1.0)  # [100, 1100) is one busy block
    rule = next(r for r in builtin_rules() if r.name == "unfused-attention")
    out = rule.evaluate(c.get)
    assert isinstance(out, Finding) and out.estimated_saving_ms == pytest.approx(0.5)


def test_fused_attention_signals(tmp_path):
    c = SignalContext(tracedoc.load(_attention_trace(fused=True).write(tmp_path / "f.json")))
    assert c.get("fused_attention_kernel_share") == pytest.approx(900 / 1400)
    assert c.get("eager_attention_kernel_share") == 0.0
    rule = next(r for r in builtin_rules() if r.name == "unfused-attention")
    assert rule.evaluate(c.get) is None


def test_bmm_without_softmax_is_not_attention(tmp_path):
    b = TraceBuilder([V100])
    b.step(1, 0, 1000)
    b.op("aten::bmm", 10, 20)
    b.kernel("volta_sgemm_128x64_nn", 12, 100, 800)
    c = SignalContext(tracedoc.load(b.write(tmp_path / "g.json")))
    assert c.get("eager_attention_kernel_share") == 0.0


AMD_PROPS = {"id": 0, "totalGlobalMem": 68702699520, "computeMajor": 9, "computeMinor": 0}


@pytest.mark.parametrize(
    "props,has",
    [
        ({"name": "AMD Radeon Graphics", "numSms": 104}, True),  # MI250 GCD as ROCm 6.2 names it (gfx90a)
        ({"name": "AMD Instinct MI100", "numSms": 120}, True),
        ({"name": "AMD Instinct MI300X", "numSms": 304, "computeMinor": 4}, True),
        ({"name": "AMD Instinct MI50", "numSms": 60}, False),  # gfx906: no MFMA
        ({"name": "AMD Radeon Graphics", "numSms": 60}, False),
    ],
)
def test_amd_matrix_core_detection(tmp_path, props, has):
    b = TraceBuilder([{**AMD_PROPS, **props}])
    b.step(1, 0, 1000)
    b.op("aten::mm", 10, 20)
    b.kernel("Cijk_Ailk_Bljk_SB_MT64x64x8_SN_1LDSB0", 12, 100, 800)
    c = SignalContext(tracedoc.load(b.write(tmp_path / "amd.json")))
    assert c.device.vendor == "AMD"
    assert c.get("has_tensor_cores") is has


def test_hip_memory_events(tmp_path):
    b = TraceBuilder([{**AMD_PROPS, "name": "AMD Instinct MI250X", "numSms": 110}])
    b.step(1, 0, 1000)
    b.kernel("Cijk_Alik_Bljk_SB_MT64x16x32_MI16x16x1_SN", 10, 100, 500)
    b.memory(50, 2_000_000, device_type=6).memory(60, 6_000_000, device_type=6).memory(70, 9e9, device_type=0)
    c = SignalContext(tracedoc.load(b.write(tmp_path / "hip.json")))
    assert c.get("peak_memory_bytes") == 6_000_000  # HIP device memory; the CPU event (type 0) does not count


def _mtia_trace(devices: list[dict] | None = None) -> dict:
    """An MTIA trace as Kineto writes one: host calls in category ``mtia_runtime``, device work in
    ``mtia_ccp_events``, ``[memory]`` events with Device Type 19 (c10::DeviceType::MTIA), no
    ``deviceProperties`` (unless ``devices`` describes some)."""
    b = TraceBuilder(devices=devices or [])
    b.step(1, 0, 1000)
    b.op("aten::mm", 10, 30)
    b.kernel("mtia_gemm_kernel", 12, 100, 600)
    b.memory(20, 1_000_000, device_type=19)
    doc = b.doc()
    for e in doc["traceEvents"]:
        if e.get("cat") == "cuda_runtime":
            e["cat"], e["name"] = "mtia_runtime", "mtiaLaunchKernel"
        elif e.get("cat") == "kernel":
            e["cat"] = "mtia_ccp_events"
    if not devices:
        del doc["deviceProperties"]
    return doc


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_mtia_trace_is_neither_cpu_only_nor_nvidia(tmp_path, engine):
    p = tmp_path / "mtia.json"
    p.write_text(json.dumps(_mtia_trace()))
    t = tracedoc.load(p, engine=engine)
    assert t.has_gpu_activity and len(t.kernels) == 1
    assert [d.vendor for d in t.devices] == ["Meta"]
    assert t.primary_device().name == "MTIA"
    r = tracedoc.analyze(p)
    assert r.signals["kernels_per_step"] == 1  # not "a CPU-only trace"
    tc = next(s for s in r.skipped if s.name == "no-tensor-core-use")
    assert "Meta" in tc.reason and "NVIDIA" in tc.reason


@pytest.mark.parametrize(
    "vendor,name,full",
    [
        ("AMD", "AMD Radeon Graphics", "AMD Radeon Graphics"),  # ROCm 6.2's name for an MI250 GCD
        ("AMD", "Radeon Pro W7900", "AMD Radeon Pro W7900"),
        ("NVIDIA", "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"),
        ("NVIDIA", "nvidia A100-SXM4-80GB", "nvidia A100-SXM4-80GB"),
        ("NVIDIA", "Tesla V100-SXM2-32GB", "NVIDIA Tesla V100-SXM2-32GB"),
        ("NVIDIA", "NVIDIAN X", "NVIDIA NVIDIAN X"),  # a longer word is not the vendor
        ("Meta", "MTIA", "Meta MTIA"),
    ],
)
def test_device_full_name_says_the_vendor_once(vendor, name, full):
    from tracedoc.trace import Device

    assert Device(0, name, None, None, None, vendor).full_name == full


@pytest.mark.parametrize(
    "doc,reason",
    [
        (
            _mtia_trace([{"id": 0, "name": "Meta MTIA T1", "totalGlobalMem": 2**34}]),
            "Tensor Core detection covers NVIDIA and AMD GPUs; this trace ran on Meta MTIA T1",
        ),
        (
            TraceBuilder([{**AMD_PROPS, "name": "AMD Radeon Graphics", "computeMajor": 11, "numSms": 48}])
            .step(1, 0, 1000)
            .kernel("Cijk_Ailk_Bljk_SB_MT64x64x8_SN_1LDSB0", 12, 100, 800)
            .doc(),
            "cannot tell whether AMD Radeon Graphics (gfx 11.0) has matrix cores",
        ),
        (
            TraceBuilder([{**AMD_PROPS, "name": "Radeon Pro W7900", "computeMajor": 11, "numSms": 48}])
            .step(1, 0, 1000)
            .kernel("Cijk_Ailk_Bljk_SB_MT64x64x8_SN_1LDSB0", 12, 100, 800)
            .doc(),
            "cannot tell whether AMD Radeon Pro W7900 (gfx 11.0) has matrix cores",
        ),
    ],
    ids=["mtia-named-meta", "amd-radeon", "radeon-without-vendor"],
)
def test_td301_skip_reason_names_the_device_with_its_vendor_once(tmp_path, doc, reason):
    """The reason as the report stores it (JSON), not only as a renderer shows it."""
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    td301 = next(s for s in tracedoc.analyze(p).skipped if s.code == "TD301")
    assert td301.reason == f"needs has_tensor_cores: {reason}"
