"""FLOPs and minimum bytes of one PyTorch op from the shapes the profiler recorded.

:func:`op_cost` reads what Kineto writes into an op's ``args`` when ``record_shapes=True``:
``Input Dims`` (one list of ints per argument; ``[]`` for a non-tensor or a 0-dim tensor),
``Input type`` (the argument's dtype as ``caffe2::TypeMeta::name()`` spells the C++ type --
``"float"``, ``"c10::Half"``, ``"c10::BFloat16"``, ``"long int"`` -- or a non-tensor kind such as
``"Scalar"``, ``"ScalarList"``, ``""``), ``Input Strides`` and ``Concrete Inputs`` (the value of
each non-tensor argument as text: ``"[2, 2]"``, ``"False"``, ``"1"``, ``"0.5"``; ``""`` for tensors
and absent optionals; traces from before PyTorch 2.0 have none).

Conventions, the same for every model:

- ``flops`` counts floating-point operations, a multiply-add being 2 (the convention of NVIDIA's
  and AMD's datasheet peaks, which count an FMA as two operations, so achieved/peak is a ratio
  of like to like).
- ``bytes`` is the least traffic the op must move: every tensor input read once (an expanded
  input, stride 0 in a dimension, counts its stored elements only) and every output written
  once. Caches make the real traffic larger (re-reads) or smaller (inputs still in L2).
- Argument positions follow each op's schema in PyTorch's
  ``aten/src/ATen/native/native_functions.yaml``, quoted in each model's docstring.
- Wrapper ops contain their implementation ops (``aten::conv2d`` > ``aten::convolution`` >
  ``aten::_convolution`` > ``aten::cudnn_convolution``; ``aten::linear`` > ``aten::addmm``;
  ``aten::matmul`` > ``aten::mm``/``aten::bmm``); each level gets the same cost, so a caller
  summing costs must take one level only. Under autocast the wrappers are recorded before the
  cast (``aten::conv2d`` shows ``float`` where ``aten::convolution`` below it shows
  ``c10::BFloat16``): where operand dtypes differ, the compute dtype is taken as the narrowest
  floating one (the autocast target), and the innermost op is the one to trust.

Data from a trace is untrusted: every malformed shape, dtype or value gives ``None``; nothing
here raises.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracedoc.perf.peaks import DevicePeak

__all__ = ["DTYPE_BYTES", "OpCost", "Roofline", "dtype_name", "op_cost", "roofline"]

#: Largest accepted dimension and element count (2**48, about 2.8e14): no device holds a tensor
#: near that (the largest GPU memories are under 2**39 bytes), and an expanded view that claims
#: more is garbage for a cost model. Past it, :func:`op_cost` gives ``None``.
MAX_NUMEL = 1 << 48
#: Most dimensions a recorded tensor may have (PyTorch's own limit is 64, ``c10::TensorImpl``).
MAX_RANK = 64


@dataclass(frozen=True)
class _DType:
    name: str  # canonical name: fp64, fp32, fp16, bf16, fp8, fp4, int64, int32, ..., bool
    size: int  # bytes per element of the recorded tensor
    category: int  # 0 bool, 1 integer, 2 floating, 3 complex (type promotion's categories)


def _d(name: str, size: int, category: int) -> _DType:
    return _DType(name, size, category)


#: ``Input type`` strings of tensors -> dtype. Source: the C++ element type of each
#: ``c10::ScalarType`` (``c10/core/ScalarType.h``, ``AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS``
#: and the float8/float4 additions) as ``caffe2::TypeMeta::name()`` demangles it
#: (``c10/util/typeid.h``); ``"long"``/``"__int64"`` are the other platforms' spellings of int64.
#: ``c10::Float4_e2m1fn_x2`` packs two fp4 values into one byte: one recorded element is 1 byte.
_DTYPES: dict[str, _DType] = {
    "double": _d("fp64", 8, 2),
    "float": _d("fp32", 4, 2),
    "c10::Half": _d("fp16", 2, 2),
    "c10::BFloat16": _d("bf16", 2, 2),
    "c10::Float8_e4m3fn": _d("fp8", 1, 2),
    "c10::Float8_e5m2": _d("fp8", 1, 2),
    "c10::Float8_e4m3fnuz": _d("fp8", 1, 2),
    "c10::Float8_e5m2fnuz": _d("fp8", 1, 2),
    "c10::Float8_e8m0fnu": _d("e8m0", 1, 2),
    "c10::Float4_e2m1fn_x2": _d("fp4", 1, 2),
    "long int": _d("int64", 8, 1),
    "long": _d("int64", 8, 1),
    "__int64": _d("int64", 8, 1),
    "long long": _d("int64", 8, 1),
    "int": _d("int32", 4, 1),
    "short int": _d("int16", 2, 1),
    "short": _d("int16", 2, 1),
    "signed char": _d("int8", 1, 1),
    "unsigned char": _d("uint8", 1, 1),
    "unsigned short": _d("uint16", 2, 1),
    "unsigned int": _d("uint32", 4, 1),
    "unsigned long": _d("uint64", 8, 1),
    "unsigned long int": _d("uint64", 8, 1),
    "bool": _d("bool", 1, 0),
    "c10::complex<c10::Half>": _d("complex32", 4, 3),
    "c10::complex<float>": _d("complex64", 8, 3),
    "c10::complex<double>": _d("complex128", 16, 3),
    "c10::qint8": _d("qint8", 1, 1),
    "c10::quint8": _d("quint8", 1, 1),
    "c10::qint32": _d("qint32", 4, 1),
    "c10::quint4x2": _d("quint4x2", 1, 1),
    "c10::quint2x4": _d("quint2x4", 1, 1),
}

#: Bytes per element of each canonical dtype name (what :attr:`OpCost.dtype` holds).
DTYPE_BYTES: dict[str, int] = {d.name: d.size for d in _DTYPES.values()}

#: ``c10::ScalarType`` codes, as a ``dtype`` argument appears in ``Concrete Inputs`` (``"6"`` is
#: float, ``"15"`` bfloat16). Source: the enum's order in ``c10/core/ScalarType.h``.
_SCALAR_TYPE_CODES: dict[int, str] = {
    0: "unsigned char",
    1: "signed char",
    2: "short int",
    3: "int",
    4: "long int",
    5: "c10::Half",
    6: "float",
    7: "double",
    8: "c10::complex<c10::Half>",
    9: "c10::complex<float>",
    10: "c10::complex<double>",
    11: "bool",
    12: "c10::qint8",
    13: "c10::quint8",
    14: "c10::qint32",
    15: "c10::BFloat16",
    23: "c10::Float8_e5m2",
    24: "c10::Float8_e4m3fn",
    25: "c10::Float8_e5m2fnuz",
    26: "c10::Float8_e4m3fnuz",
    44: "c10::Float8_e8m0fnu",
    45: "c10::Float4_e2m1fn_x2",
}

_FP32 = _DTYPES["float"]
_INT64 = _DTYPES["long int"]
_BOOL = _DTYPES["bool"]


def dtype_name(kineto_type: object) -> str | None:
    """The canonical dtype name (``"bf16"``) of one ``Input type`` string (``"c10::BFloat16"``),
    ``None`` for a non-tensor kind or anything unknown."""
    d = _DTYPES.get(kineto_type) if isinstance(kineto_type, str) else None
    return d.name if d else None


@dataclass(frozen=True)
class OpCost:
    """What one op must compute and move.

    Attributes:
        flops: floating-point operations (a multiply-add is 2).
        bytes: least bytes read and written (each input once, each output once).
        kind: ``"gemm"``, ``"conv"``, ``"attention"``, ``"norm"``, ``"softmax"``,
            ``"elementwise"`` or ``"reduction"``.
        dtype: the compute dtype (``"fp32"``, ``"bf16"``, ``"fp16"``, ``"fp8"``, ``"int64"``...).
        m, n, k: the GEMM's dimensions (output ``m x n``, inner ``k``); for a convolution the
            implicit GEMM of its forward pass (``m = N*P*Q`` output pixels, ``n = K/groups``
            output channels per group, ``k = C/groups*R*S``; NVIDIA, "Convolutional Layers
            User's Guide", section "Convolution Algorithms"); ``None`` for other kinds.
        batch: how many such GEMMs (bmm's batch, matmul's broadcast batch, conv's groups).
    """

    flops: float
    bytes: float
    kind: str
    dtype: str
    m: int | None = None
    n: int | None = None
    k: int | None = None
    batch: int | None = None

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, FLOP per byte (``None`` when no bytes move)."""
        return self.flops / self.bytes if self.bytes > 0 else None

    @property
    def tc_aligned(self) -> bool | None:
        """Whether ``m``, ``n`` and ``k`` are all multiples of 16 bytes' worth of elements (8 for
        fp16/bf16, 4 for fp32/tf32, 16 for fp8/int8), the size cuBLAS needs to use tensor cores
        at full efficiency (NVIDIA, "Matrix Multiplication Background User's Guide", "Tensor
        Core Requirements", cuBLAS 11.0 and later). ``None`` for other kinds."""
        size = DTYPE_BYTES.get(self.dtype)
        if self.m is None or self.n is None or self.k is None or not size:
            return None
        step = 32 if self.dtype == "fp4" else max(1, 16 // size)
        return self.m % step == 0 and self.n % step == 0 and self.k % step == 0


# --------------------------------------------------------------------------- reading the args


@dataclass(frozen=True)
class _T:
    """One tensor argument."""

    shape: tuple[int, ...]
    dtype: _DType
    stored: int  # elements in memory: dimensions with stride 0 (expanded) count once

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.stored * self.dtype.size


class _Bad(Exception):
    """Malformed input: :func:`op_cost` answers ``None``."""


def _shape(dims: object) -> tuple[int, ...]:
    if not isinstance(dims, (list, tuple)) or len(dims) > MAX_RANK:
        raise _Bad
    if not all(type(x) is int and 0 <= x <= MAX_NUMEL for x in dims):
        raise _Bad
    shape = tuple(dims)
    if math.prod(shape) > MAX_NUMEL:
        raise _Bad
    return shape


class _Args:
    """The recorded arguments of one op, checked: ``t(i)`` the i-th tensor (``None`` when the
    argument is not a tensor), ``ints(i)``/``int(i)``/``bool(i)``/``float(i)`` its concrete value."""

    def __init__(self, dims: object, types: object, concrete: object, strides: object) -> None:
        if not isinstance(dims, (list, tuple)) or not isinstance(types, (list, tuple)):
            raise _Bad
        if len(dims) != len(types) or len(dims) > 256:
            raise _Bad
        if not all(isinstance(t, str) for t in types):
            raise _Bad
        self.shapes = [_shape(d) for d in dims]
        self.types = list(types)
        ok_concrete = isinstance(concrete, (list, tuple)) and all(isinstance(c, str) for c in concrete)
        self.concrete = list(concrete) if ok_concrete else []
        ok_strides = isinstance(strides, (list, tuple)) and len(strides) == len(dims)
        self.strides = list(strides) if ok_strides else None

    def __len__(self) -> int:
        return len(self.shapes)

    def t(self, i: int) -> _T | None:
        if i >= len(self.shapes):
            return None
        dt = _DTYPES.get(self.types[i])
        if dt is None:
            return None
        shape = self.shapes[i]
        stored = math.prod(shape)
        st = self.strides[i] if self.strides is not None else None
        if isinstance(st, (list, tuple)) and len(st) == len(shape) and all(type(s) is int for s in st):
            stored = math.prod(n for n, s in zip(shape, st, strict=True) if s != 0) if stored else 0
        return _T(shape, dt, stored)

    def need(self, i: int) -> _T:
        t = self.t(i)
        if t is None:
            raise _Bad
        return t

    def c(self, i: int) -> str | None:
        """The concrete text of argument ``i``, ``None`` when absent or empty."""
        if i >= len(self.concrete):
            return None
        text = self.concrete[i].strip()
        return text if text and text != "None" else None

    def ints(self, i: int) -> list[int] | None:
        text = self.c(i)
        if text is None or len(text) > 1000:
            return None
        if not re.fullmatch(r"\[?\s*-?\d+(\s*,\s*-?\d+)*\s*,?\s*\]?|\[\s*\]", text):
            return None
        vals = [int(x) for x in re.findall(r"-?\d+", text)]
        if any(abs(v) > MAX_NUMEL for v in vals):
            return None
        return vals

    def int(self, i: int) -> int | None:
        vals = self.ints(i)
        text = self.c(i) or ""
        return vals[0] if vals is not None and len(vals) == 1 and not text.startswith("[") else None

    def bool(self, i: int) -> bool | None:
        return {"True": True, "False": False, "true": True, "false": False, "1": True, "0": False}.get(self.c(i) or "")

    def bools(self, i: int) -> list[bool] | None:
        text = self.c(i)
        if text is None or not re.fullmatch(r"\[\s*(True|False)(\s*,\s*(True|False))*\s*\]", text):
            return None
        return [w == "True" for w in re.findall(r"True|False", text)]

    def float(self, i: int) -> float | None:
        text = self.c(i)
        try:
            v = float(text) if text is not None and len(text) < 64 else None
        except ValueError:
            return None
        return v if v is not None and math.isfinite(v) else None

    def dtype_code(self, i: int) -> _DType | None:
        code = self.int(i)
        name = _SCALAR_TYPE_CODES.get(code) if code is not None else None
        return _DTYPES[name] if name else None

    def tensors(self) -> list[_T]:
        return [t for t in (self.t(i) for i in range(len(self))) if t is not None]


def _broadcast(*shapes: Sequence[int]) -> tuple[int, ...]:
    """NumPy/PyTorch broadcasting (https://pytorch.org/docs/stable/notes/broadcasting.html)."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        sizes = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0} - {1}
        if len(sizes) > 1:
            raise _Bad
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _compute_dtype(*ts: _T | None) -> _DType:
    """The narrowest floating dtype among the operands (autocast's target where they differ),
    else the first operand's."""
    real = [t for t in ts if t is not None]
    floats = [t.dtype for t in real if t.dtype.category == 2]
    if floats:
        return min(floats, key=lambda d: d.size)
    return real[0].dtype


def _promote(ts: Sequence[_T]) -> _DType:
    """The result dtype of an elementwise op, per PyTorch's type promotion
    (https://pytorch.org/docs/stable/tensor_attributes.html#type-promotion-doc): dimensioned
    tensors decide; a 0-dim tensor only when its category (bool < integer < floating < complex)
    is higher. Within a category the larger type wins; fp16 with bf16 gives fp32."""

    def widest(ds: list[_DType]) -> _DType:
        best = ds[0]
        for d in ds[1:]:
            if d.category > best.category or (d.category == best.category and d.size > best.size):
                best = d
            elif d.category == best.category == 2 and d.size == best.size and d.name != best.name:
                best = _FP32
        return best

    dimensioned = [t.dtype for t in ts if t.shape]
    zero_dim = [t.dtype for t in ts if not t.shape]
    if not dimensioned:
        return widest(zero_dim)
    out = widest(dimensioned)
    higher = [d for d in zero_dim if d.category > out.category]
    return widest(higher) if higher else out


# --------------------------------------------------------------------------- GEMM


def _gemm(m: int, n: int, k: int, batch: int, ins: Sequence[_T | None], out: _DType, dt: _DType, bias: bool) -> OpCost:
    """``batch`` GEMMs of ``m x k`` by ``k x n``: ``2*m*n*k`` FLOPs each (one multiply-add per
    output element per ``k``), plus ``m*n`` adds when a bias or ``beta*self`` term is added.
    Bytes: the operands once, the ``m x n`` output once."""
    flops = 2 * batch * m * n * k + (batch * m * n if bias else 0)
    nbytes = sum(t.nbytes for t in ins if t is not None) + batch * m * n * out.size
    return OpCost(float(flops), float(nbytes), "gemm", dt.name, m, n, k, batch)


def _mm(a: _Args) -> OpCost:
    """``mm(Tensor self, Tensor mat2)``: ``[m, k] @ [k, n]``."""
    x, w = a.need(0), a.need(1)
    if len(x.shape) != 2 or len(w.shape) != 2 or x.shape[1] != w.shape[0]:
        raise _Bad
    dt = _compute_dtype(x, w)
    return _gemm(x.shape[0], w.shape[1], x.shape[1], 1, [x, w], x.dtype, dt, False)


def _beta_term(a: _Args, i: int, bias: _T | None) -> bool:
    beta = a.float(i)
    return bias is not None and beta != 0.0


def _addmm(a: _Args) -> OpCost:
    """``addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1)``:
    ``beta*self + alpha*(mat1 @ mat2)``; also ``_addmm_activation`` (same first five)."""
    c, x, w = a.t(0), a.need(1), a.need(2)
    if len(x.shape) != 2 or len(w.shape) != 2 or x.shape[1] != w.shape[0]:
        raise _Bad
    m, k, n = x.shape[0], x.shape[1], w.shape[1]
    if c is not None and _broadcast(c.shape, (m, n)) != (m, n):
        raise _Bad
    use = _beta_term(a, 3, c)
    return _gemm(m, n, k, 1, [x, w, c if use else None], x.dtype, _compute_dtype(x, w), use)


def _bmm(a: _Args) -> OpCost:
    """``bmm(Tensor self, Tensor mat2)``: ``[b, m, k] @ [b, k, n]``."""
    x, w = a.need(0), a.need(1)
    if len(x.shape) != 3 or len(w.shape) != 3 or x.shape[0] != w.shape[0] or x.shape[2] != w.shape[1]:
        raise _Bad
    return _gemm(x.shape[1], w.shape[2], x.shape[2], x.shape[0], [x, w], x.dtype, _compute_dtype(x, w), False)


def _baddbmm(a: _Args) -> OpCost:
    """``baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1)``."""
    c, x, w = a.t(0), a.need(1), a.need(2)
    if len(x.shape) != 3 or len(w.shape) != 3 or x.shape[0] != w.shape[0] or x.shape[2] != w.shape[1]:
        raise _Bad
    b, m, k, n = x.shape[0], x.shape[1], x.shape[2], w.shape[2]
    if c is not None and _broadcast(c.shape, (b, m, n)) != (b, m, n):
        raise _Bad
    use = _beta_term(a, 3, c)
    return _gemm(m, n, k, b, [x, w, c if use else None], x.dtype, _compute_dtype(x, w), use)


def _linear(a: _Args) -> OpCost:
    """``linear(Tensor input, Tensor weight, Tensor? bias=None)``: ``input @ weight.T + bias``,
    ``input [..., k]``, ``weight [n, k]``; ``m`` is the product of input's leading dimensions."""
    x, w, bias = a.need(0), a.need(1), a.t(2)
    if not x.shape or len(w.shape) != 2 or x.shape[-1] != w.shape[1]:
        raise _Bad
    m, n, k = math.prod(x.shape[:-1]), w.shape[0], w.shape[1]
    if bias is not None and _broadcast(bias.shape, (m, n)) != (m, n):
        raise _Bad
    return _gemm(m, n, k, 1, [x, w, bias], x.dtype, _compute_dtype(x, w), bias is not None)


def _matmul(a: _Args) -> OpCost:
    """``matmul(Tensor self, Tensor other)`` with ``torch.matmul``'s rules
    (https://pytorch.org/docs/stable/generated/torch.matmul.html): a 1-D first operand is a row
    ``[1, k]``, a 1-D second a column ``[k, 1]``; batch dimensions broadcast."""
    x, w = a.need(0), a.need(1)
    if not x.shape or not w.shape:
        raise _Bad
    xs = (1, *x.shape) if len(x.shape) == 1 else x.shape
    ws = (*w.shape, 1) if len(w.shape) == 1 else w.shape
    if xs[-1] != ws[-2]:
        raise _Bad
    batch = math.prod(_broadcast(xs[:-2], ws[:-2]))
    return _gemm(xs[-2], ws[-1], xs[-1], batch, [x, w], x.dtype, _compute_dtype(x, w), False)


def _scaled_mm(a: _Args) -> OpCost:
    """``_scaled_mm(Tensor self, Tensor mat2, Tensor scale_a, Tensor scale_b, Tensor? bias=None,
    Tensor? scale_result=None, ScalarType? out_dtype=None, bool use_fast_accum=False)``: an fp8
    (or packed fp4) GEMM; the output is ``out_dtype``, else ``self``'s dtype. Two fp4 values share
    a byte (``Float4_e2m1fn_x2``), so the logical ``k`` is twice the recorded one."""
    x, w = a.need(0), a.need(1)
    if len(x.shape) != 2 or len(w.shape) != 2 or x.shape[1] != w.shape[0]:
        raise _Bad
    m, k, n = x.shape[0], x.shape[1], w.shape[1]
    if x.dtype.name == "fp4":
        k *= 2
    out = a.dtype_code(6) or x.dtype
    bias = a.t(4)
    ins = [x, w, a.t(2), a.t(3), bias, a.t(5)]
    return _gemm(m, n, k, 1, ins, out, _compute_dtype(x, w), bias is not None)


# --------------------------------------------------------------------------- convolution


def _spatial(vals: list[int] | None, nsp: int, what: str) -> list[int]:
    if vals is None or not vals:
        raise _Bad
    if len(vals) == 1:
        vals = vals * nsp
    if len(vals) != nsp or any(v < 0 for v in vals) or (what != "padding" and any(v < 1 for v in vals)):
        raise _Bad
    return vals


@dataclass(frozen=True)
class _ConvLayout:
    """Argument positions of one convolution schema (``None``: the schema has no such argument)."""

    bias: int | None
    stride: int
    padding: int
    dilation: int
    groups: int
    transposed: int | bool = False
    output_padding: int | None = None


#: Forward convolution schemas, from ``native_functions.yaml``:
#: ``conv{1,2,3}d(input, weight, bias, stride, padding, dilation, groups)``;
#: ``convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
#: groups)`` and ``_convolution`` (the same nine, then benchmark, deterministic, cudnn_enabled,
#: allow_tf32); ``conv_transpose{1,2,3}d(input, weight, bias, stride, padding, output_padding,
#: groups, dilation)``; ``cudnn_convolution(self, weight, padding, stride, dilation, groups,
#: benchmark, deterministic, allow_tf32)`` (PyTorch >= 1.8; before it a ``bias`` came third, as in
#: ``miopen_convolution(self, weight, bias, padding, stride, dilation, groups, benchmark,
#: deterministic)`` and ``mkldnn_convolution(self, weight, bias, padding, stride, dilation,
#: groups)``); ``cudnn_convolution_transpose(self, weight, padding, output_padding, stride,
#: dilation, groups, benchmark, deterministic, allow_tf32)``.
_CONV_LAYOUTS: dict[str, _ConvLayout] = {
    **{f"conv{d}d": _ConvLayout(2, 3, 4, 5, 6) for d in (1, 2, 3)},
    "convolution": _ConvLayout(2, 3, 4, 5, 8, 6, 7),
    "_convolution": _ConvLayout(2, 3, 4, 5, 8, 6, 7),
    **{f"conv_transpose{d}d": _ConvLayout(2, 3, 4, 7, 6, True, 5) for d in (1, 2, 3)},
    "cudnn_convolution": _ConvLayout(None, 3, 2, 4, 5),
    "miopen_convolution": _ConvLayout(2, 4, 3, 5, 6),
    "mkldnn_convolution": _ConvLayout(2, 4, 3, 5, 6),
    "cudnn_convolution_transpose": _ConvLayout(None, 4, 2, 5, 6, True, 3),
}
_LIST_KINDS = {"ScalarList", "GenericList", "IntList", "SymIntList"}


def _conv_forward_flops(go_numel: int, w: tuple[int, ...]) -> int:
    """Multiply-adds of a convolution: every output element (non-transposed) takes
    ``C/groups * R*S`` of them, i.e. ``prod(weight[1:])`` (the weight is ``[K, C/groups, R, S]``),
    two FLOPs each. For a transposed convolution the same holds with input and output swapped,
    the weight being ``[C_in, C_out/groups, R, S]``. Source: the definition of the convolution
    (https://pytorch.org/docs/stable/generated/torch.nn.Conv2d.html); the same count as
    ``torch.utils.flop_counter.conv_flop_count``."""
    return 2 * go_numel * math.prod(w[1:])


def _conv(a: _Args, name: str) -> OpCost:
    """A forward convolution: the output size per spatial dimension is
    ``floor((in + 2*pad - dil*(k-1) - 1)/stride) + 1``, or for a transposed convolution
    ``(in-1)*stride - 2*pad + dil*(k-1) + output_padding + 1`` (the formulas of
    ``torch.nn.Conv2d`` and ``torch.nn.ConvTranspose2d``'s documentation). Stride, padding and
    dilation come from ``Concrete Inputs``; without them the output size is unknown: ``None``."""
    lay = _CONV_LAYOUTS[name]
    if name == "cudnn_convolution" and len(a.types) > 2 and a.types[2] not in _LIST_KINDS:
        lay = _ConvLayout(2, 4, 3, 5, 6)  # PyTorch < 1.8: (self, weight, bias, padding, stride, ...)
    x, w = a.need(0), a.need(1)
    bias = a.t(lay.bias) if lay.bias is not None else None
    if len(x.shape) == len(w.shape) - 1 and name.startswith("conv"):
        x = _T((1, *x.shape), x.dtype, x.stored)  # unbatched input of conv{1,2,3}d
    nsp = len(w.shape) - 2
    if nsp not in (1, 2, 3) or len(x.shape) != len(w.shape):
        raise _Bad
    transposed = lay.transposed if isinstance(lay.transposed, bool) else a.bool(lay.transposed)
    if transposed is None:
        raise _Bad
    stride = _spatial(a.ints(lay.stride), nsp, "stride")
    dilation = _spatial(a.ints(lay.dilation), nsp, "dilation")
    pad_text = a.c(lay.padding)
    ksz, insz = w.shape[2:], x.shape[2:]
    if pad_text in ("same", "'same'", "valid", "'valid'"):
        padding = None if "same" in pad_text else [0] * nsp
    else:
        padding = _spatial(a.ints(lay.padding), nsp, "padding")
    groups = a.int(lay.groups)
    cin, cout = x.shape[1], (w.shape[1] if transposed else w.shape[0])
    if groups is None:
        groups = cin // w.shape[1] if not transposed and w.shape[1] and cin % w.shape[1] == 0 else 1
    if groups < 1:
        raise _Bad
    if transposed:
        cout = w.shape[1] * groups
        if cin != w.shape[0] or w.shape[0] % groups:
            raise _Bad
        opad = [0] * nsp if lay.output_padding is None else _spatial(a.ints(lay.output_padding) or [0], nsp, "padding")
        if padding is None:
            raise _Bad
        out_sp = [
            (i - 1) * s - 2 * p + d * (k - 1) + op + 1
            for i, k, s, p, d, op in zip(insz, ksz, stride, padding, dilation, opad, strict=True)
        ]
    else:
        if cin != w.shape[1] * groups or w.shape[0] % groups:
            raise _Bad
        if padding is None:  # padding="same" keeps the input size (stride must be 1)
            out_sp = list(insz)
        else:
            out_sp = [
                (i + 2 * p - d * (k - 1) - 1) // s + 1
                for i, k, s, p, d in zip(insz, ksz, stride, padding, dilation, strict=True)
            ]
    if any(o < 1 for o in out_sp):
        raise _Bad
    n_out = x.shape[0] * cout * math.prod(out_sp)
    if n_out > MAX_NUMEL:
        raise _Bad
    dt = _compute_dtype(x, w)
    if transposed:
        flops = _conv_forward_flops(x.numel, w.shape)
        m, n, k = x.shape[0] * math.prod(insz), w.shape[1] * math.prod(ksz), w.shape[0] // groups
    else:
        flops = _conv_forward_flops(n_out, w.shape)
        m, n, k = x.shape[0] * math.prod(out_sp), w.shape[0] // groups, w.shape[1] * math.prod(ksz)
    if bias is not None:
        flops += n_out
    nbytes = x.nbytes + w.nbytes + (bias.nbytes if bias is not None else 0) + n_out * x.dtype.size
    return OpCost(float(flops), float(nbytes), "conv", dt.name, m, n, k, groups)


def _conv_gemm_dims(go: tuple[int, ...], w: tuple[int, ...], groups: int) -> tuple[int, int, int]:
    return go[0] * math.prod(go[2:]), w[0] // groups, w[1] * math.prod(w[2:])


def _conv_backward(a: _Args, name: str) -> OpCost:
    """Gradients of a convolution. Each of grad-input and grad-weight is one GEMM as large as
    the forward pass (grad-input: ``m = N*H*W``, ``n = C``, ``k = K*R*S``; grad-weight:
    ``m = K``, ``n = C*R*S``, ``k = N*P*Q``; NVIDIA, "Convolutional Layers User's Guide"), so
    each costs the forward FLOPs; grad-bias is one add per grad-output element. Which of the
    three are computed is ``output_mask`` when recorded, else grad-input and grad-weight.

    Schemas: ``convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
    dilation, transposed, output_padding, groups, output_mask)``; before PyTorch 1.11
    ``cudnn_convolution_backward(self, grad_output, weight, padding, stride, dilation, groups,
    benchmark, deterministic, allow_tf32, output_mask)`` (two-element mask, no bias).
    ``m, n, k`` report the forward pass's implicit GEMM."""
    if name == "convolution_backward":
        go, x, w = a.need(0), a.need(1), a.need(2)
        transposed = a.bool(7) or False
        groups, mask = a.int(9), a.bools(10)
    else:
        x, go, w = a.need(0), a.need(1), a.need(2)
        transposed, groups, mask = False, a.int(6), a.bools(10)
    if not (len(go.shape) == len(x.shape) == len(w.shape) >= 3) or go.shape[0] != x.shape[0]:
        raise _Bad
    if (x.shape[1] if transposed else go.shape[1]) != w.shape[0]:
        raise _Bad
    if groups is None:
        small = go if transposed else x
        groups = small.shape[1] // w.shape[1] if w.shape[1] and small.shape[1] % w.shape[1] == 0 else 1
    if groups < 1:
        raise _Bad
    mask = (mask or [True, True, False]) + [False] * 3
    fwd = _conv_forward_flops(x.numel if transposed else go.numel, w.shape)
    flops = fwd * (mask[0] + mask[1]) + (go.numel if mask[2] else 0)
    nbytes = go.nbytes
    if mask[0]:
        nbytes += w.nbytes + x.numel * x.dtype.size
    if mask[1]:
        nbytes += x.nbytes + w.numel * w.dtype.size
    if mask[2]:
        nbytes += go.shape[1] * go.dtype.size
    if transposed:
        m, n, k = x.shape[0] * math.prod(x.shape[2:]), w.shape[1] * math.prod(w.shape[2:]), w.shape[0] // groups
    else:
        m, n, k = _conv_gemm_dims(go.shape, w.shape, groups)
    return OpCost(float(flops), float(nbytes), "conv", _compute_dtype(go, w).name, m, n, k, groups)


def _conv_backward_part(a: _Args, name: str) -> OpCost:
    """PyTorch < 1.11's halves: ``cudnn_convolution_backward_input(self_size, grad_output,
    weight, padding, stride, dilation, groups, ...)`` and
    ``cudnn_convolution_backward_weight(weight_size, grad_output, self, padding, stride,
    dilation, groups, ...)``; each costs the forward FLOPs. The size not recorded as a tensor
    comes from ``Concrete Inputs``; without it the bytes are unknown: ``None``."""
    size = a.ints(0)
    go, other = a.need(1), a.need(2)
    if size is None or len(size) != len(go.shape) or len(other.shape) != len(go.shape) or any(s < 0 for s in size):
        raise _Bad
    if name.endswith("_input"):
        w, x_numel = other.shape, math.prod(size)
        nbytes = go.nbytes + other.nbytes + x_numel * go.dtype.size
    else:
        w = tuple(size)
        nbytes = go.nbytes + other.nbytes + math.prod(w) * go.dtype.size
    if w[0] != go.shape[1]:
        raise _Bad
    groups = a.int(6) or 1
    m, n, k = _conv_gemm_dims(go.shape, w, groups)
    flops = _conv_forward_flops(go.numel, w)
    return OpCost(float(flops), float(nbytes), "conv", _compute_dtype(go, other).name, m, n, k, groups)


# --------------------------------------------------------------------------- attention


@dataclass(frozen=True)
class _AttnLayout:
    q: int  # position of query (key and value follow it)
    heads_last: bool  # [B, L, H, E] (the FlashAttention kernels) rather than [B, H, L, E]
    causal: int | None  # position of is_causal (or custom_mask_type)
    align: str  # "top_left" (SDPA's documented mask), "bottom_right" (FlashAttention >= 2.1), "mask_type"
    backward: bool
    window: tuple[int, int] | None = None  # positions of window_size_left/right


#: Schemas (``native_functions.yaml``):
#: ``scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
#: enable_gqa)``; ``_scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal,
#: return_debug_mask, scale)``; ``_scaled_dot_product_efficient_attention(query, key, value,
#: attn_bias, compute_log_sumexp, dropout_p, is_causal, scale)``;
#: ``_scaled_dot_product_cudnn_attention(query, key, value, attn_bias, compute_log_sumexp,
#: dropout_p, is_causal, return_debug_mask, scale)``; ``_flash_attention_forward(query, key, value,
#: cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, return_debug_mask, scale,
#: window_size_left, window_size_right, seqused_k, alibi_slopes)``;
#: ``_efficient_attention_forward(query, key, value, bias, cu_seqlens_q, cu_seqlens_k,
#: max_seqlen_q, max_seqlen_k, dropout_p, custom_mask_type, ...)``; the backward ops take
#: ``grad_out`` first: ``_scaled_dot_product_flash_attention_backward(grad_out, query, key, value,
#: out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, ...)``,
#: ``_scaled_dot_product_efficient_attention_backward(grad_out_, query, key, value, attn_bias,
#: out, logsumexp, philox_seed, philox_offset, dropout_p, grad_input_mask, is_causal, scale)``,
#: ``_flash_attention_backward(grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k,
#: max_q, max_k, dropout_p, is_causal, ...)``, ``_efficient_attention_backward(grad_out_, query,
#: key, value, bias, out, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, logsumexp,
#: dropout_p, philox_seed, philox_offset, custom_mask_type, ...)``.
_ATTN_LAYOUTS: dict[str, _AttnLayout] = {
    "scaled_dot_product_attention": _AttnLayout(0, False, 5, "top_left", False),
    "_scaled_dot_product_flash_attention": _AttnLayout(0, False, 4, "top_left", False),
    "_scaled_dot_product_flash_attention_for_cpu": _AttnLayout(0, False, 4, "top_left", False),
    "_scaled_dot_product_efficient_attention": _AttnLayout(0, False, 6, "top_left", False),
    "_scaled_dot_product_cudnn_attention": _AttnLayout(0, False, 6, "top_left", False),
    "_flash_attention_forward": _AttnLayout(0, True, 8, "bottom_right", False, window=(11, 12)),
    "_efficient_attention_forward": _AttnLayout(0, True, 9, "mask_type", False),
    "_scaled_dot_product_flash_attention_backward": _AttnLayout(1, False, 11, "top_left", True),
    "_scaled_dot_product_efficient_attention_backward": _AttnLayout(1, False, 11, "top_left", True),
    "_flash_attention_backward": _AttnLayout(1, True, 11, "bottom_right", True, window=(15, 16)),
    "_efficient_attention_backward": _AttnLayout(1, True, 14, "mask_type", True),
}

#: Backward attention FLOPs over forward: the forward pass is two GEMMs over the score matrix
#: (``Q K^T`` and ``P V``); the backward pass is five (recomputing ``Q K^T``, then ``dV``, ``dP``,
#: ``dQ``, ``dK``), hence 2.5x. Source: Dao, "FlashAttention-2" (2023), section 4 and the
#: FLOP count of its benchmark, ``benchmarks/benchmark_flash_attention.py``
#: (``flops(...) * (2.5 if mode == "bwd" else 1)``).
ATTN_BACKWARD_FACTOR = 2.5


def _causal_pairs(lq: int, lk: int, align: str) -> float:
    """How many (query, key) pairs a causal mask keeps. ``lq == lk``: exactly half the score
    matrix, the convention of FlashAttention's FLOP count (the exact count, ``L*(L+1)/2``, differs
    by ``1/(2L)``). Otherwise the exact count: a top-left aligned mask (``tril(diagonal=0)``,
    SDPA's documented ``is_causal``) keeps ``min(i+1, lk)`` keys for query ``i``; a bottom-right
    aligned one (FlashAttention >= 2.1, and ``custom_mask_type=2``) keeps ``min(i+1+lk-lq, lk)``,
    at least 0."""
    if lq == lk:
        return lq * lk / 2
    if align == "top_left":
        return lq * (lq + 1) / 2 if lq <= lk else lk * (lk + 1) / 2 + (lq - lk) * lk
    off = lk - lq
    return lq * (lq + 1) / 2 + lq * off if off >= 0 else lk * (lk + 1) / 2


def _attention(a: _Args, name: str) -> OpCost:
    """Attention ``softmax(Q K^T * scale + mask) V``: ``2*L*S*E`` FLOPs for the scores and
    ``2*L*S*Ev`` for ``P V`` per (batch, query head), the softmax's ``O(L*S)`` left out (as in
    FlashAttention's count); a causal mask keeps :func:`_causal_pairs` of the ``L*S`` pairs and
    both GEMMs skip the rest. Bytes: every recorded tensor argument read once (Q, K, V, a mask;
    in the backward pass also the output, its gradient and the ``logsumexp``), the output
    written (forward) or dQ, dK, dV written (backward). The forward pass's ``logsumexp`` output
    (``L`` floats per head) is left out: the forward ops do not record their outputs' shapes,
    and it is ``4/(E*size)`` of the output. Grouped-query attention
    (fewer K/V heads) counts FLOPs per query head and bytes of K/V as recorded. Variable-length
    batches (``cum_seq_q`` given, 3-D query) and sliding windows give ``None``."""
    lay = _ATTN_LAYOUTS[name]
    q, k, v = a.need(lay.q), a.need(lay.q + 1), a.need(lay.q + 2)
    if not (len(q.shape) == len(k.shape) == len(v.shape)) or len(q.shape) < (4 if lay.heads_last else 3):
        raise _Bad
    if lay.heads_last:
        if len(q.shape) != 4 or q.shape[0] != k.shape[0] or k.shape[1] != v.shape[1] or k.shape[2] != v.shape[2]:
            raise _Bad
        bh, lq, e = q.shape[0] * q.shape[2], q.shape[1], q.shape[3]
        lk, ek, ev, hq, hk = k.shape[1], k.shape[3], v.shape[3], q.shape[2], k.shape[2]
    else:
        if q.shape[:-3] != k.shape[:-3] or k.shape[:-1] != v.shape[:-1]:
            raise _Bad
        bh, lq, e = math.prod(q.shape[:-2]), q.shape[-2], q.shape[-1]
        lk, ek, ev, hq, hk = k.shape[-2], k.shape[-1], v.shape[-1], q.shape[-3], k.shape[-3]
    if e != ek or hk == 0 or hq % hk:
        raise _Bad
    if lay.window is not None and any((a.int(i) or -1) >= 0 for i in lay.window):
        raise _Bad  # sliding-window attention: not modelled
    if lay.align == "mask_type":
        mtype = a.int(lay.causal) if lay.causal is not None else None
        causal, align = bool(mtype), ("bottom_right" if mtype == 2 else "top_left")
    else:
        causal, align = bool(a.bool(lay.causal)) if lay.causal is not None else False, lay.align
    pairs = _causal_pairs(lq, lk, align) if causal else float(lq * lk)
    flops = 2.0 * bh * pairs * (e + ev)
    out_bytes = bh * lq * ev * q.dtype.size
    reads = sum(t.nbytes for t in a.tensors())  # q, k, v, a mask; backward: grad_out, out, logsumexp too
    if lay.backward:
        flops *= ATTN_BACKWARD_FACTOR
        nbytes = reads + (q.numel + k.numel + v.numel) * q.dtype.size  # dq, dk, dv written
    else:
        nbytes = reads + out_bytes
    return OpCost(flops, float(nbytes), "attention", _compute_dtype(q, k, v).name)


# --------------------------------------------------------------------------- normalisation

#: FLOPs per element, counted from the formulas. Batch and layer norm in training
#: (Ioffe & Szegedy 2015, "Batch Normalization", Algorithm 1; Ba et al. 2016, "Layer
#: Normalization", eq. 4): mean 1 (add), variance 3 (subtract, square, add), normalise 2
#: (subtract, multiply by the inverse deviation), affine 2 (multiply, add): 8. Batch norm in
#: inference folds the statistics and affine into one scale and shift per channel: 2. RMSNorm
#: (Zhang & Sennrich 2019, eq. 4): square and add 2, scale 1, gain 1: 4. Backward (the same
#: papers' gradients): grad-input 9 (recompute x-hat 2, dy*gamma 1, two reductions 3, combine 3),
#: grad-weight 2 (dy*x-hat, add), grad-bias 1 (add).
NORM_FLOPS = {"train": 8, "eval": 2, "rms": 4, "bwd_input": 9, "bwd_weight": 2, "bwd_bias": 1}


def _norm_cost(flops: int, nbytes: int, x: _T) -> OpCost:
    return OpCost(float(flops), float(nbytes), "norm", _compute_dtype(x).name)


def _batch_norm(a: _Args, name: str) -> OpCost:
    """``batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
    cudnn_enabled)``; ``_batch_norm_impl_index``, ``native_batch_norm``, ``cudnn_batch_norm``,
    ``miopen_batch_norm``, ``_native_batch_norm_legit`` share the first six;
    ``_native_batch_norm_legit_no_training`` has no ``training``. Bytes: the tensors read, the
    output written, and in training the running statistics updated and the batch's mean and
    inverse deviation saved (4 vectors of ``C``). ``training`` unknown counts as training."""
    x = a.need(0)
    if len(x.shape) < 2:
        raise _Bad
    training = False if name.endswith("no_training") else a.bool(5)
    training = True if training is None else training
    c = x.shape[1]
    nbytes = sum(t.nbytes for t in a.tensors()) + x.numel * x.dtype.size
    if training:
        nbytes += 4 * c * _FP32.size
    per = NORM_FLOPS["train" if training else "eval"]
    return _norm_cost(per * x.numel, nbytes, x)


def _layer_norm(a: _Args, name: str) -> OpCost:
    """``layer_norm(input, normalized_shape, weight, bias, eps, cudnn_enable)`` and
    ``native_layer_norm(input, normalized_shape, weight, bias, eps)``; ``rms_norm(input,
    normalized_shape, weight, eps)`` and ``_fused_rms_norm(input, normalized_shape, weight, eps)``;
    ``group_norm(input, num_groups, weight, bias, eps, cudnn_enabled)`` and
    ``native_group_norm(input, weight, bias, N, C, HxW, group, eps)``. Bytes: the tensors read, the
    output written, and for layer and group norm the per-row mean and inverse deviation (fp32)
    written."""
    x = a.need(0)
    if not x.shape:
        raise _Bad
    nbytes = sum(t.nbytes for t in a.tensors()) + x.numel * x.dtype.size
    if "rms" in name:
        return _norm_cost(NORM_FLOPS["rms"] * x.numel, nbytes, x)
    if "group" in name:
        groups = a.int(6) if name.startswith("native") else a.int(1)
        rows = x.shape[0] * groups if groups and groups > 0 else None
    else:
        norm_shape = a.ints(1)
        w = a.t(2)
        if norm_shape is None and w is not None:
            norm_shape = list(w.shape)
        width = math.prod(norm_shape) if norm_shape is not None and all(s > 0 for s in norm_shape) else 0
        rows = x.numel // width if width and x.numel % width == 0 else None
    if rows is None:
        raise _Bad
    return _norm_cost(NORM_FLOPS["train"] * x.numel, nbytes + 2 * rows * _FP32.size, x)


#: Backward normalisation schemas: position of (input, grad_output, output_mask, channel dim).
#: ``native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
#: save_invstd, train, eps, output_mask)``; ``cudnn_batch_norm_backward(input, grad_output, weight,
#: running_mean, running_var, save_mean, save_var, epsilon, reserveSpace)`` and
#: ``miopen_batch_norm_backward`` (the first eight; both compute all three gradients);
#: ``native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
#: output_mask)``; ``native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW,
#: group, output_mask)``.
_NORM_BWD = {
    "native_batch_norm_backward": (1, 0, 9),
    "cudnn_batch_norm_backward": (0, 1, None),
    "miopen_batch_norm_backward": (0, 1, None),
    "native_layer_norm_backward": (1, 0, 7),
    "native_group_norm_backward": (1, 0, 9),
}


def _norm_backward(a: _Args, name: str) -> OpCost:
    """Gradients of a normalisation: reads every tensor argument once, writes grad-input (the
    input's size) and the grad-weight and grad-bias the mask asks for (each the size of the
    weight; all three when no mask is recorded). FLOPs per :data:`NORM_FLOPS`."""
    xi, gi, mi = _NORM_BWD[name]
    x, go = a.need(xi), a.need(gi)
    if x.shape != go.shape or not x.shape:
        raise _Bad
    mask = (a.bools(mi) if mi is not None else None) or [True, True, True]
    mask = mask + [False] * 3
    w = a.t(5 if name == "native_layer_norm_backward" else 4 if name == "native_group_norm_backward" else 2)
    wbytes = w.numel * w.dtype.size if w is not None and w.shape else 0
    nbytes = sum(t.nbytes for t in a.tensors()) + x.numel * x.dtype.size * mask[0] + wbytes * (mask[1] + mask[2])
    per = NORM_FLOPS["bwd_input"] * mask[0] + NORM_FLOPS["bwd_weight"] * mask[1] + NORM_FLOPS["bwd_bias"] * mask[2]
    return _norm_cost(per * x.numel, nbytes, x)


# --------------------------------------------------------------------------- softmax

#: FLOPs per element of a softmax over one dimension: running max 1, subtract 1, exp 1, sum 1,
#: divide (softmax) or subtract the log of the sum (log-softmax) 1: 5. Backward: softmax
#: ``dx = y * (dy - sum(dy * y))`` is 4 (multiply, add, subtract, multiply); log-softmax
#: ``dx = dy - exp(y) * sum(dy)`` is 4 (add, exp, multiply, subtract).
SOFTMAX_FLOPS = {"fwd": 5, "bwd": 4}


def _softmax(a: _Args, name: str) -> OpCost:
    """``softmax(self, dim, dtype=None)`` / ``log_softmax`` (output ``dtype`` when given);
    ``_softmax(self, dim, half_to_float)`` / ``_log_softmax`` (fp32 output when
    ``half_to_float``); ``_softmax_backward_data(grad_output, output, dim, input_dtype)`` /
    ``_log_softmax_backward_data`` (grad-input in ``input_dtype``). Bytes: inputs read, output
    written."""
    x = a.need(0)
    if name.endswith("backward_data"):
        y = a.need(1)
        if x.shape != y.shape:
            raise _Bad
        out = a.dtype_code(3) or x.dtype
        nbytes = x.nbytes + y.nbytes + x.numel * out.size
        return OpCost(float(SOFTMAX_FLOPS["bwd"] * x.numel), float(nbytes), "softmax", _compute_dtype(x).name)
    if name.startswith("_"):
        out = _FP32 if a.bool(2) else x.dtype
    else:
        out = a.dtype_code(2) or x.dtype
    nbytes = x.nbytes + x.numel * out.size
    return OpCost(float(SOFTMAX_FLOPS["fwd"] * x.numel), float(nbytes), "softmax", _compute_dtype(x).name)


# --------------------------------------------------------------------------- elementwise

#: Elementwise ops and their FLOPs per output element: 1 for one arithmetic operation or an
#: activation (the convention of counting each output element's operation once; a
#: transcendental function is one operation on the SFU), 2 for a multiply-add, 3 for
#: ``addcmul``/``addcdiv``/``lerp`` (``a + w*(b-a)``: three), 0 for data movement
#: (copy, fill, cast).
_EW_FLOPS: dict[str, int] = {
    **dict.fromkeys(
        "add sub mul div rsub neg abs exp exp2 log log2 log1p sqrt rsqrt reciprocal sin cos tanh sigmoid relu gelu "
        "silu mish hardswish hardsigmoid hardtanh leaky_relu elu softplus pow clamp clamp_min clamp_max "
        "maximum minimum threshold threshold_backward gelu_backward silu_backward sigmoid_backward tanh_backward "
        "hardtanh_backward leaky_relu_backward where masked_fill eq ne lt le gt ge logical_not logical_and "
        "logical_or bitwise_and bitwise_or bitwise_not sign floor ceil round trunc frac square erf".split(),
        1,
    ),
    **dict.fromkeys("addcmul addcdiv lerp".split(), 3),
    **dict.fromkeys("copy fill zero clone _to_copy".split(), 0),
}
_COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or"}


def _elementwise(a: _Args, name: str) -> OpCost:
    """An elementwise op: output shape by broadcasting every tensor argument; bytes: each tensor
    input read once (stored elements only), the output written once in its dtype (type
    promotion; ``bool`` for comparisons; the target dtype of ``_to_copy(self, dtype, ...)``); the
    reported dtype is the inputs' promoted dtype, the one the op computes in (a data move's: its
    output's). An
    in-place op (``add_``) writes into ``self``; ``fill_``/``zero_`` write without reading;
    ``copy_(self, src)`` reads ``src`` and writes ``self``. ``add``/``sub`` with ``alpha != 1``
    are a multiply-add (2 FLOPs)."""
    inplace = name.endswith("_") and not name.endswith("__")
    base = name[:-1] if inplace else name
    ts = a.tensors()
    if not ts:
        raise _Bad
    self_t = a.t(0)
    if inplace:
        if self_t is None:
            raise _Bad
        shape, out = self_t.shape, self_t.dtype
        if _broadcast(*[t.shape for t in ts]) != shape and base not in ("copy",):
            raise _Bad
    else:
        shape = _broadcast(*[t.shape for t in ts])
        out = _promote(ts)
        if base in _COMPARISONS:
            out = _BOOL
        elif base == "_to_copy":
            out = a.dtype_code(1) or out
    numel = math.prod(shape)
    if base in ("fill", "zero"):
        reads = sum(t.nbytes for t in ts[1:])
    elif base == "copy":
        src = a.need(1)
        if _broadcast(src.shape, shape) != shape:
            raise _Bad
        reads = src.nbytes
    else:
        reads = sum(t.nbytes for t in ts)
    per = _EW_FLOPS[base]
    if base in ("add", "sub") and a.c(2) not in (None, "1", "1."):
        per = 2
    # the compute dtype: the inputs' promoted dtype (a comparison's output is bool, its work is
    # not); a pure data move (per == 0: copy, fill) computes nothing and keeps its output's
    dt = out if per == 0 else _promote(ts)
    return OpCost(float(per * numel), float(reads + numel * out.size), "elementwise", dt.name)


# --------------------------------------------------------------------------- reductions

_REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "prod", "argmax", "argmin", "norm", "linalg_vector_norm"}


def _reduction(a: _Args, name: str) -> OpCost:
    """``sum(self, dim, keepdim, dtype)``, ``mean`` (the same), ``amax``/``amin(self, dim,
    keepdim)``, ``max.dim``/``min.dim(self, dim, keepdim)`` (values and int64 indices),
    ``argmax``/``argmin(self, dim, keepdim)`` (int64 indices), ``prod(self, dim, keepdim, dtype)``;
    a one-argument call reduces everything. One FLOP per input element (each is combined once);
    bytes: the input read, the output written. ``dim`` missing from ``Concrete Inputs`` when the
    schema has one: ``None``."""
    x = a.need(0)
    if a.t(1) is not None:
        raise _Bad  # max(self, other), min(self, other): elementwise, not a reduction
    if name in ("norm", "linalg_vector_norm"):
        dims = a.ints(2)
        keep = a.bool(3) or False
    else:
        dims = a.ints(1) if len(a) > 1 else []
        keep = a.bool(2) or False
    if dims is None:
        if len(a) > 1 and a.types[1] in _LIST_KINDS | {"Scalar", "Int"} and a.c(1) is None:
            raise _Bad
        dims = []
    rank = len(x.shape)
    if any(not -max(rank, 1) <= d < max(rank, 1) for d in dims):
        raise _Bad
    axes = {d % rank for d in dims} if rank and dims else set(range(rank))
    if keep:
        out_numel = math.prod(1 if i in axes else s for i, s in enumerate(x.shape))
    else:
        out_numel = math.prod(s for i, s in enumerate(x.shape) if i not in axes)
    if name in ("argmax", "argmin"):
        out_bytes = out_numel * _INT64.size
    elif name in ("max", "min") and dims:
        out_bytes = out_numel * (x.dtype.size + _INT64.size)
    else:
        out_bytes = out_numel * x.dtype.size
    return OpCost(float(x.numel), float(x.nbytes + out_bytes), "reduction", _compute_dtype(x).name)


# --------------------------------------------------------------------------- dispatch

_GEMMS: dict[str, Callable[[_Args], OpCost]] = {
    "mm": _mm,
    "addmm": _addmm,
    "_addmm_activation": _addmm,
    "bmm": _bmm,
    "baddbmm": _baddbmm,
    "linear": _linear,
    "matmul": _matmul,
    "_scaled_mm": _scaled_mm,
}
_NAMED: dict[str, Callable[[_Args, str], OpCost]] = {
    **dict.fromkeys(_CONV_LAYOUTS, _conv),
    "convolution_backward": _conv_backward,
    "cudnn_convolution_backward": _conv_backward,
    "cudnn_convolution_backward_input": _conv_backward_part,
    "cudnn_convolution_backward_weight": _conv_backward_part,
    **dict.fromkeys(_ATTN_LAYOUTS, _attention),
    **dict.fromkeys(
        "batch_norm _batch_norm_impl_index native_batch_norm cudnn_batch_norm miopen_batch_norm "
        "_native_batch_norm_legit _native_batch_norm_legit_no_training".split(),
        _batch_norm,
    ),
    **dict.fromkeys(
        "layer_norm native_layer_norm group_norm native_group_norm rms_norm _fused_rms_norm".split(), _layer_norm
    ),
    **dict.fromkeys(_NORM_BWD, _norm_backward),
    **dict.fromkeys(
        "softmax _softmax log_softmax _log_softmax _softmax_backward_data _log_softmax_backward_data".split(), _softmax
    ),
    **dict.fromkeys(_REDUCTIONS, _reduction),
}


def _handler(name: str) -> Callable[[_Args], OpCost] | None:
    if name in _GEMMS:
        return _GEMMS[name]
    if name in _NAMED:
        fn = _NAMED[name]
        return lambda a: fn(a, name)
    base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
    if base in _EW_FLOPS:
        return lambda a: _elementwise(a, name)
    return None


def op_cost(
    name: object,
    dims: object,
    types: object,
    concrete: object = None,
    strides: object = None,
) -> OpCost | None:
    """The cost of one recorded op, or ``None`` when the op is not modelled or its recorded
    arguments are malformed or incomplete.

    Args:
        name: the op's name as Kineto writes it (``"aten::mm"``; the ``aten::`` prefix optional).
        dims: ``Input Dims``, one list of ints per argument.
        types: ``Input type``, one string per argument.
        concrete: ``Concrete Inputs``, one string per argument (absent before PyTorch 2.0).
        strides: ``Input Strides``, one list per argument (used to count an expanded input's
            stored elements only).

    Example: ``op_cost("aten::mm", [[128, 256], [256, 512]], ["c10::Half", "c10::Half"])`` is
    ``2*128*256*512`` FLOPs and ``2*(128*256 + 256*512 + 128*512)`` bytes.
    """
    if not isinstance(name, str) or len(name) > 200:
        return None
    bare = name[6:] if name.startswith("aten::") else name
    if "::" in bare:
        return None
    fn = _handler(bare)
    if fn is None:
        return None
    try:
        cost = fn(_Args(dims, types, concrete, strides))
    except (_Bad, ArithmeticError, ValueError, TypeError, IndexError, KeyError, AttributeError):
        return None
    if not (math.isfinite(cost.flops) and math.isfinite(cost.bytes)) or cost.flops < 0 or cost.bytes < 0:
        return None
    return cost


# --------------------------------------------------------------------------- roofline

#: Whether an op's dtype runs on tensor/matrix cores by default in PyTorch: fp16, bf16, fp8,
#: fp4 and int8 GEMMs, convolutions and attention do; fp32 convolutions do on Ampere and later
#: (``torch.backends.cudnn.allow_tf32`` defaults to True) while fp32 matmuls do not
#: (``torch.backends.cuda.matmul.allow_tf32`` defaults to False since PyTorch 1.12). Source:
#: PyTorch docs, "CUDA semantics", section "TensorFloat-32 (TF32) on Ampere (and later) devices".
_TC_KINDS = {"gemm", "conv", "attention"}


def _default_tensor_cores(cost: OpCost) -> bool:
    if cost.kind not in _TC_KINDS:
        return False
    if cost.dtype in ("fp16", "bf16", "fp8", "fp4", "int8"):
        return True
    return cost.dtype == "fp32" and cost.kind == "conv"


@dataclass(frozen=True)
class Roofline:
    """One op on the roofline.

    Attributes:
        seconds: the op's measured time.
        achieved_tflops: ``flops / seconds / 1e12`` (``None`` when the time is not positive).
        achieved_tbs: ``bytes / seconds / 1e12``.
        intensity: FLOP per byte (``None`` when no bytes move).
        peak_tflops: the compute peak that applies (dtype, tensor cores or not); ``None``: unknown.
        peak_tbs: the memory bandwidth peak; ``None``: unknown.
        ridge: ``peak_tflops / peak_tbs``, FLOP per byte, where the roofline bends.
        bound: ``"compute"`` when ``intensity >= ridge``, else ``"memory"``; ``None`` when unknown.
        pct_compute: achieved over peak compute, percent.
        pct_bandwidth: achieved over peak bandwidth, percent.
        pct_of_peak: the percentage against the peak that bounds the op (``pct_compute`` when
            compute-bound, ``pct_bandwidth`` when memory-bound).
        tensor_cores: whether the compute peak is the tensor-core one.
    """

    seconds: float
    achieved_tflops: float | None
    achieved_tbs: float | None
    intensity: float | None
    peak_tflops: float | None
    peak_tbs: float | None
    ridge: float | None
    bound: str | None
    pct_compute: float | None
    pct_bandwidth: float | None
    pct_of_peak: float | None
    tensor_cores: bool

    @property
    def achieved_tbps(self) -> float | None:
        """Alias of :attr:`achieved_tbs` (terabytes per second)."""
        return self.achieved_tbs


def roofline(cost: OpCost, seconds: float, peak: DevicePeak | None, *, tensor_cores: bool | None = None) -> Roofline:
    """Place ``cost`` run in ``seconds`` against ``peak`` (``None``: the device is unknown, and
    every field that needs a peak is ``None``). ``tensor_cores`` overrides the default of
    :data:`_TC_KINDS` (for instance ``True`` for fp32 GEMMs when TF32 is enabled)."""
    tc = _default_tensor_cores(cost) if tensor_cores is None else bool(tensor_cores)
    ok = isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0
    secs = float(seconds) if isinstance(seconds, (int, float)) else float("nan")
    tflops = cost.flops / secs / 1e12 if ok else None
    tbs = cost.bytes / secs / 1e12 if ok else None
    intensity = cost.intensity
    p_flops = peak.peak_tflops(cost.dtype, tc) if peak is not None else None
    p_bw = peak.mem_tbs if peak is not None else None
    ridge = p_flops / p_bw if p_flops and p_bw else None
    bound = None
    if ridge is not None and intensity is not None:
        bound = "compute" if intensity >= ridge else "memory"
    elif ridge is not None and cost.bytes == 0 and cost.flops > 0:
        bound = "compute"
    pct_c = 100.0 * tflops / p_flops if tflops is not None and p_flops else None
    pct_b = 100.0 * tbs / p_bw if tbs is not None and p_bw else None
    pct = pct_c if bound == "compute" else pct_b if bound == "memory" else None
    return Roofline(secs, tflops, tbs, intensity, p_flops, p_bw, ridge, bound, pct_c, pct_b, pct, tc)
