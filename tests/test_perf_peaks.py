"""tracedoc.perf.peaks: device matching, the peaks table and the roofline.

The device names and properties of the fixtures are read from the fixtures themselves (stdlib
only), so a new fixture with an unknown device fails here until the table knows it or the test
says why it is unknown."""

from __future__ import annotations

import gzip
import json
import math
import re
import tomllib
from pathlib import Path

import pytest

from tracedoc.perf.flops import OpCost, op_cost, roofline
from tracedoc.perf.flops import roofline as flops_roofline
from tracedoc.perf.peaks import DevicePeak, devices, match_device

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
TABLE = tomllib.loads((ROOT / "tracedoc" / "perf" / "peaks.toml").read_text())["device"]


def _device_entries(path: Path) -> list[dict]:
    """The ``deviceProperties`` (or legacy ``computeProperties``) list of one trace: decoded from
    where the key appears in the text (Kineto writes it before the events), else from the whole
    document."""
    text = gzip.open(path, "rt", encoding="utf-8").read()
    found = re.search(r'"(deviceProperties|computeProperties)"\s*:\s*', text)
    if found is None:
        return []
    entries, _ = json.JSONDecoder().raw_decode(text, found.end())
    return entries


def _fixture_devices() -> list[tuple[str, str, dict]]:
    out = []
    for path in sorted(FIXTURES.glob("*.json.gz")):
        for props in _device_entries(path):
            out.append((path.name, props["name"], props))
    return out


#: What each fixture's device is (by the fixtures' PROVENANCE and the recorded properties).
EXPECTED = {
    "NVIDIA A100-PG509-200": "a100-sxm4-40gb",  # SXM4 board PG509, 42.3e9 bytes: the 40 GB part
    "NVIDIA H100 80GB HBM3": "h100-sxm",  # 132 SMs, HBM3
    "Tesla V100-SXM2-32GB": "v100-sxm2",
    "Tesla V100-DGXS-32GB": "v100-sxm2",  # DGX Station's V100 (SXM2 module)
    "AMD Instinct MI300X": "mi300x",
    "AMD Instinct MI300X VF": "mi300x",  # SR-IOV virtual function of the whole GPU
    "AMD Radeon Graphics": "mi210",  # gfx90a (9.0), 104 CUs, 64 GB: one MI250 GCD or an MI210, same figures
}


def test_every_fixture_device_is_matched():
    found = _fixture_devices()
    assert {name for _, name, _ in found} == set(EXPECTED)
    for fixture, name, props in found:
        peak = match_device(name, props)
        assert peak is not None and peak.id == EXPECTED[name], (fixture, name)


@pytest.mark.parametrize(
    ("name", "props", "expected"),
    [
        ("NVIDIA H100 PCIe", None, "h100-pcie"),
        ("NVIDIA H100", {"numSms": 114}, "h100-pcie"),  # the name cannot tell: 114 SMs is the PCIe card
        ("NVIDIA H100", {"numSms": 132, "totalGlobalMem": 85017493504}, "h100-sxm"),
        ("NVIDIA H100 NVL", None, "h100-nvl"),
        ("NVIDIA H200", None, "h200-sxm"),
        ("NVIDIA H200 NVL", None, "h200-nvl"),
        ("NVIDIA A100-SXM4-80GB", None, "a100-sxm4-80gb"),  # the "80GB" in the name stands for the memory
        ("NVIDIA A100-SXM4-40GB", None, "a100-sxm4-40gb"),
        ("NVIDIA A100 80GB PCIe", None, "a100-pcie-80gb"),
        ("NVIDIA A100-PCIE-40GB", None, "a100-pcie-40gb"),
        ("Tesla V100-PCIE-16GB", None, "v100-pcie"),
        ("Tesla V100S-PCIE-32GB", None, "v100s-pcie"),
        ("Tesla T4", None, "t4"),
        ("NVIDIA A10", None, "a10"),
        ("NVIDIA L40", None, "l40"),
        ("NVIDIA L40S", None, "l40s"),
        ("NVIDIA GeForce RTX 4090", None, "rtx-4090"),
        ("NVIDIA GeForce RTX 2080 Ti", None, "rtx-2080-ti"),
        ("NVIDIA RTX 6000 Ada Generation", None, "rtx-6000-ada"),
        ("NVIDIA B200", None, "b200"),
        ("NVIDIA GB200", None, "gb200"),
        ("NVIDIA GH200 480GB", {"totalGlobalMem": 102_005_473_280}, "gh200-hbm3"),
        ("AMD Instinct MI250X", None, "mi250x-gcd"),
        ("AMD Instinct MI250X / MI250", {"numSms": 110, "computeMajor": 9, "computeMinor": 0}, "mi250x-gcd"),
        ("AMD Instinct MI250X / MI250", {"numSms": 104, "computeMajor": 9, "computeMinor": 0}, "mi250-gcd"),
        ("AMD Radeon Graphics", {"numSms": 110, "computeMajor": 9, "computeMinor": 0}, "mi250x-gcd"),
        (
            "AMD Radeon Graphics",
            {"numSms": 304, "computeMajor": 9, "computeMinor": 4, "totalGlobalMem": 206_141_652_992},
            "mi300x",
        ),
        ("AMD Instinct MI355X", None, "mi355x"),
    ],
)
def test_synthetic_names(name, props, expected):
    peak = match_device(name, props)
    assert peak is not None and peak.id == expected


@pytest.mark.parametrize(
    ("name", "props"),
    [
        ("NVIDIA H100", None),  # SXM, PCIe or NVL: nothing to tell them apart
        ("NVIDIA A100", None),
        ("Tesla V100", {"numSms": 80}),  # SXM2 and PCIe both have 80 SMs
        ("AMD Instinct MI250X / MI250", None),
        ("NVIDIA GeForce GTX 1080", {"numSms": 20, "computeMajor": 6, "computeMinor": 1}),
        ("NVIDIA H800", {"numSms": 132, "computeMajor": 9, "computeMinor": 0}),  # not an H100: unknown
        ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", None),
        ("AMD Radeon Graphics", None),  # generic name, no properties
        ("AMD Radeon Graphics", {"numSms": 304, "computeMajor": 9, "computeMinor": 4}),  # MI300X or MI325X
        ("AMD Radeon Graphics", {"numSms": 256, "computeMajor": 9, "computeMinor": 5}),  # MI350X or MI355X
        ("", None),
        ("x" * 1000, None),
    ],
)
def test_unknown_or_ambiguous_is_none(name, props):
    assert match_device(name, props) is None


def test_snake_case_properties():
    props = {"compute_capability": "9.0", "num_sms": 114, "total_memory_bytes": 85_000_000_000, "vendor": "nvidia"}
    assert match_device("NVIDIA H100", props).id == "h100-pcie"
    assert match_device("AMD Radeon Graphics", {"compute_capability": (9, 0), "num_sms": 104}).id == "mi210"


def test_hostile_properties_are_ignored():
    assert match_device("NVIDIA H100 80GB HBM3", {"numSms": "132", "totalGlobalMem": None}).id == "h100-sxm"
    assert match_device("NVIDIA H100 80GB HBM3", "not a dict").id == "h100-sxm"  # type: ignore[arg-type]
    assert match_device(None) is None  # type: ignore[arg-type]


def test_table_rows_are_complete_and_sourced():
    ids = [row["id"] for row in TABLE]
    assert len(ids) == len(set(ids))
    wanted = [
        "v100-sxm2", "v100-pcie", "a100-sxm4-40gb", "a100-sxm4-80gb", "a100-pcie-40gb", "a100-pcie-80gb", "a10",
        "a30", "a40", "l4", "l40", "l40s", "h100-sxm", "h100-pcie", "h100-nvl", "h200-sxm", "gh200-hbm3", "b200",
        "b100", "gb200", "rtx-pro-6000-blackwell", "t4", "rtx-2080-ti", "rtx-3090", "rtx-a6000", "rtx-4090",
        "rtx-6000-ada", "rtx-5090", "mi100", "mi210", "mi250-gcd", "mi250x-gcd", "mi300a", "mi300x", "mi325x",
        "mi350x", "mi355x",
    ]  # fmt: skip
    assert set(wanted) <= set(ids)
    for row in TABLE:
        assert row["source"].strip() and row["vendor"] in ("nvidia", "amd"), row["id"]
        assert re.compile(row["family"])  # a valid pattern
        assert isinstance(row["mem_tbs"], float) and row["mem_tbs"] > 0, row["id"]
        rates = [row[k] for k in row if k.endswith("_tc") or k in ("fp32", "fp64")]
        assert rates and all(isinstance(v, float) and v > 0 for v in rates), row["id"]
    for peak in devices():
        assert match_device(peak.name) is None or isinstance(match_device(peak.name), DevicePeak)


def test_dense_figures_are_half_the_datasheets_sparse_ones():
    """Spot checks against the datasheets' printed numbers (sparse / 2 where they print sparse)."""
    h100 = match_device("NVIDIA H100 80GB HBM3")
    assert h100.peak_tflops("bf16", tensor_cores=True) == 1979 / 2  # "BF16 Tensor Core 1,979 TFLOPS*"
    assert h100.peak_tflops("fp8", tensor_cores=True) == 3958 / 2
    assert h100.peak_tflops("fp32", tensor_cores=True) == 989 / 2  # TF32
    assert h100.peak_tflops("fp32", tensor_cores=False) == 67.0
    assert h100.peak_tflops("fp64", tensor_cores=True) == 67.0
    assert h100.mem_tbs == 3.35
    a100 = match_device("NVIDIA A100-SXM4-80GB")
    assert a100.peak_tflops("fp16", True) == 624 / 2 and a100.peak_tflops("fp32", True) == 312 / 2
    assert a100.peak_tflops("fp8", True) is None  # no fp8 on Ampere
    # AMD prints dense figures; an MI250X GCD is half the package's 383 TFLOPS FP16
    assert match_device("AMD Instinct MI250X").peak_tflops("fp16", True) == 383 / 2
    mi300x = match_device("AMD Instinct MI300X")
    assert mi300x.peak_tflops("bf16", True) == 1307.4 and mi300x.mem_tbs == 5.3
    # MI100 has no TF32: fp32 on matrix cores is its matrix FP32
    assert match_device("AMD Instinct MI100").peak_tflops("fp32", True) == 46.1
    # fp16 without tensor cores gets the fp32 vector rate; ints have no vector peak here
    assert h100.peak_tflops("fp16", tensor_cores=False) == 67.0
    assert h100.peak_tflops("int64", tensor_cores=False) is None
    assert h100.peak_tflops("torch.float8", tensor_cores=True) is None


# --------------------------------------------------------------------------- roofline


def test_roofline_compute_bound_gemm_on_h100():
    # 4096^3 bf16 GEMM: 2*4096^3 FLOPs, 3 * 4096^2 * 2 bytes; intensity 4096/3 = 1365 FLOP/byte
    cost = op_cost("aten::mm", [[4096, 4096], [4096, 4096]], ["c10::BFloat16"] * 2)
    r = roofline(cost, 200e-6, match_device("NVIDIA H100 80GB HBM3"))
    flops = 2 * 4096**3
    assert r.achieved_tflops == pytest.approx(flops / 200e-6 / 1e12)  # 687.2 TFLOP/s
    assert r.achieved_tbs == pytest.approx(3 * 4096**2 * 2 / 200e-6 / 1e12)
    assert r.intensity == pytest.approx(4096 / 3)
    assert r.peak_tflops == 989.5 and r.peak_tbs == 3.35
    assert r.ridge == pytest.approx(989.5 / 3.35)  # 295.4 FLOP/byte
    assert r.bound == "compute" and r.tensor_cores is True
    assert r.pct_of_peak == pytest.approx(100 * (flops / 200e-6 / 1e12) / 989.5)  # 69.4 %


def test_roofline_memory_bound_elementwise():
    # relu of 2^26 fp32 elements: 2^26 FLOPs, 2 * 4 * 2^26 bytes: 1/8 FLOP/byte
    cost = op_cost("aten::relu", [[1 << 26]], ["float"])
    r = roofline(cost, 200e-6, match_device("NVIDIA H100 80GB HBM3"))
    assert r.intensity == 1 / 8
    assert r.peak_tflops == 67.0 and r.tensor_cores is False  # fp32 vector rate
    assert r.bound == "memory"
    assert r.pct_of_peak == pytest.approx(100 * (8 * (1 << 26) / 200e-6 / 1e12) / 3.35)  # 80.1 %


def test_roofline_fp32_conv_uses_tf32_but_fp32_gemm_does_not():
    h100 = match_device("NVIDIA H100 80GB HBM3")
    conv = OpCost(1e12, 1e9, "conv", "fp32", 1, 1, 1, 1)
    gemm = OpCost(1e12, 1e9, "gemm", "fp32", 1, 1, 1, 1)
    assert roofline(conv, 1.0, h100).peak_tflops == 494.5  # cudnn.allow_tf32 defaults to True
    assert roofline(gemm, 1.0, h100).peak_tflops == 67.0  # matmul.allow_tf32 defaults to False
    assert roofline(gemm, 1.0, h100, tensor_cores=True).peak_tflops == 494.5


def test_roofline_is_one_function_in_both_modules():
    assert roofline is flops_roofline
    r = roofline(OpCost(1e12, 1e12, "elementwise", "fp32"), 1.0, None)
    assert r.achieved_tbps == r.achieved_tbs == 1.0


def test_roofline_unknown_device_and_bad_times():
    cost = OpCost(2e9, 1e9, "gemm", "bf16", 1, 1, 1, 1)
    r = roofline(cost, 1e-3, None)
    assert r.achieved_tflops == pytest.approx(2.0) and r.achieved_tbs == pytest.approx(1.0)
    assert (r.peak_tflops, r.peak_tbs, r.ridge, r.bound, r.pct_compute, r.pct_bandwidth, r.pct_of_peak) == (None,) * 7
    h100 = match_device("NVIDIA H100 80GB HBM3")
    for bad in (0.0, -1.0, math.nan, math.inf):
        r = roofline(cost, bad, h100)
        assert r.achieved_tflops is None and r.pct_of_peak is None
        assert r.ridge == pytest.approx(989.5 / 3.35)  # the device's ridge does not need a time
