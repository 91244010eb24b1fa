"""The forward operators over the last axis (leading axes flattened into rows)."""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Union

from . import _arrays
from . import _onlinenorm as _ext
from ._context import Context, context_for

_QUANTIZED = {"int8": _ext.DTYPE_I8, "float8_e4m3fn": _ext.DTYPE_F8_E4M3}
_KINDS = {"layer_norm": _ext.LAYER_NORM, "rms_norm": _ext.RMS_NORM}


def _softmax(x: Any, out: Any, out_dtype: Any, context: Optional[Context], log: bool) -> Any:
    ctx = context_for(x, context)
    y = _arrays.output(x, x.shape, out, out_dtype)
    _ext.softmax(ctx, _arrays.for_dlpack(x), _arrays.for_dlpack(y), log)
    return y


def softmax(x: Any, *, out: Any = None, out_dtype: Any = None, context: Optional[Context] = None) -> Any:
    """exp(x - max) / sum exp(x - max) over the last axis. The output is `out`, else a new array
    of x's framework and device, of dtype `out_dtype` (default: x's)."""
    return _softmax(x, out, out_dtype, context, log=False)


def log_softmax(x: Any, *, out: Any = None, out_dtype: Any = None, context: Optional[Context] = None) -> Any:
    """x - max - log sum exp(x - max) over the last axis; out and out_dtype as in softmax."""
    return _softmax(x, out, out_dtype, context, log=True)


class NormResult(NamedTuple):
    """What `norm` computed: y, and h = x + residual (when stored), the row statistics
    (float32, x.shape[:-1]; mean is None for RMSNorm) and the per-row dequantization scale of a
    dynamically quantized y (else None)."""

    y: Any
    residual_out: Any
    mean: Any
    rstd: Any
    y_scale: Any


def norm(
    x: Any,
    kind: str = "layer_norm",
    gamma: Any = None,
    beta: Any = None,
    eps: Optional[float] = None,
    *,
    weight_offset: float = 0.0,
    residual: Any = None,
    residual_out: Union[Any, bool, None] = None,
    out: Any = None,
    out_dtype: Any = None,
    y_scale: Any = None,
    y_static_scale: Optional[float] = None,
    context: Optional[Context] = None,
) -> NormResult:
    """LayerNorm ("layer_norm") or RMSNorm ("rms_norm") of h = x (+ residual) with the scale
    weight_offset + gamma, as onorm_norm (docs/API.md, "norms with options").

    residual_out: an array that receives h, True for a new one of x's dtype, or None.
    out_dtype "int8" or "float8_e4m3fn" quantizes y: per row with a dynamic scale (written to
    `y_scale`, a new float32 array unless given) or with `y_static_scale`.
    eps defaults to 1e-5 (LayerNorm) and 1e-6 (RMSNorm).
    """
    return _norm(x, kind, gamma, beta, eps, weight_offset, residual, residual_out, out, out_dtype, y_scale,
                 y_static_scale, context, stats=True)


def _norm(x: Any, kind: str, gamma: Any, beta: Any, eps: Optional[float], weight_offset: float, residual: Any,
          residual_out: Union[Any, bool, None], out: Any, out_dtype: Any, y_scale: Any,
          y_static_scale: Optional[float], context: Optional[Context], stats: bool) -> NormResult:
    """norm; without `stats` no row statistics are allocated or written (mean and rstd None):
    two arrays fewer to make and pass is most of a short call's host time on a GPU."""
    if kind not in _KINDS:
        raise ValueError(f"kind: {kind!r} is none of {', '.join(_KINDS)}")
    if eps is None:
        eps = 1e-5 if kind == "layer_norm" else 1e-6
    ctx = context_for(x, context)
    y = _arrays.output(x, x.shape, out, out_dtype)
    y_name = _arrays.dtype_name(y)
    stats_shape = tuple(x.shape[:-1])
    mean = _arrays.empty(x, stats_shape, "float32") if stats and kind == "layer_norm" else None
    rstd = _arrays.empty(x, stats_shape, "float32") if stats else None
    if residual_out is True:
        residual_out = _arrays.empty(x, x.shape, _arrays.dtype_name(x))
    elif residual_out is False:
        residual_out = None
    elif residual_out is not None:
        residual_out = _arrays.output(x, x.shape, residual_out, None, "residual_out")
    if y_name in _QUANTIZED and y_static_scale is None and y_scale is None:
        y_scale = _arrays.empty(x, stats_shape, "float32")
    # float8 crosses as its bytes, the dtype named apart (not every framework exports it).
    y_dtype = -1
    y_passed = y
    if y_name == "float8_e4m3fn":
        y_dtype, y_passed = _QUANTIZED[y_name], _arrays.raw_bytes(y)
    d = _arrays.for_dlpack
    _ext.norm(
        ctx, _KINDS[kind], d(x), d(y_passed), y_dtype,
        None if gamma is None else d(gamma), None if beta is None else d(beta),
        float(eps), float(weight_offset),
        None if residual is None else d(residual), None if residual_out is None else d(residual_out),
        mean, rstd, None if y_scale is None else d(y_scale),
        0.0 if y_static_scale is None else float(y_static_scale),
    )
    return NormResult(y, residual_out, mean, rstd, y_scale)


def layer_norm(
    x: Any,
    gamma: Any = None,
    beta: Any = None,
    eps: float = 1e-5,
    *,
    out: Any = None,
    out_dtype: Any = None,
    return_stats: bool = False,
    context: Optional[Context] = None,
) -> Any:
    """(x - mean) * rstd * gamma + beta over the last axis, rstd = 1/sqrt(var + eps) (biased
    variance). gamma and beta: x.shape[-1] elements (None: 1 and 0). Returns y, or
    (y, mean, rstd) with return_stats (float32, x.shape[:-1]: what layer_norm_backward takes)."""
    r = _norm(x, "layer_norm", gamma, beta, eps, 0.0, None, None, out, out_dtype, None, None, context,
              stats=return_stats)
    return (r.y, r.mean, r.rstd) if return_stats else r.y


def rms_norm(
    x: Any,
    gamma: Any = None,
    eps: float = 1e-6,
    *,
    out: Any = None,
    out_dtype: Any = None,
    return_stats: bool = False,
    context: Optional[Context] = None,
) -> Any:
    """x * rstd * gamma over the last axis, rstd = 1/sqrt(mean(x^2) + eps). Returns y, or
    (y, rstd) with return_stats (float32, x.shape[:-1]: what rms_norm_backward takes)."""
    r = _norm(x, "rms_norm", gamma, None, eps, 0.0, None, None, out, out_dtype, None, None, context,
              stats=return_stats)
    return (r.y, r.rstd) if return_stats else r.y
