"""The backward passes, from the forward's output (softmax) or statistics (the norms)."""
from __future__ import annotations

from typing import Any, Optional, Tuple

from . import _arrays
from . import _onlinenorm as _ext
from ._context import Context, context_for


def _softmax_backward(y: Any, dy: Any, out: Any, out_dtype: Any, context: Optional[Context], log: bool) -> Any:
    ctx = context_for(y, context)
    dx = _arrays.output(dy, dy.shape, out, out_dtype)
    d = _arrays.for_dlpack
    _ext.softmax_backward(ctx, d(y), d(dy), d(dx), log)
    return dx


def softmax_backward(y: Any, dy: Any, *, out: Any = None, out_dtype: Any = None, context: Optional[Context] = None) -> Any:
    """dx = y * (dy - sum(y * dy)) over the last axis, y the softmax output. out may be y or dy
    (in place); the new array's dtype defaults to dy's."""
    return _softmax_backward(y, dy, out, out_dtype, context, log=False)


def log_softmax_backward(
    y: Any, dy: Any, *, out: Any = None, out_dtype: Any = None, context: Optional[Context] = None
) -> Any:
    """dx = dy - exp(y) * sum(dy) over the last axis, y the log_softmax output."""
    return _softmax_backward(y, dy, out, out_dtype, context, log=True)


def _norm_backward(
    kind: int, x: Any, dy: Any, mean: Any, rstd: Any, gamma: Any, weight_offset: float, dresidual: Any,
    out: Any, out_dtype: Any, context: Optional[Context],
) -> Tuple[Any, Any, Any]:
    ctx = context_for(x, context)
    dx = _arrays.output(x, x.shape, out, out_dtype)
    cols = x.shape[-1] if len(x.shape) else 0
    dgamma = _arrays.empty(x, (cols,), "float32")
    dbeta = _arrays.empty(x, (cols,), "float32") if kind == _ext.LAYER_NORM else None
    d = _arrays.for_dlpack
    _ext.norm_backward(
        ctx, kind, d(x), d(dy), d(dx), None if gamma is None else d(gamma), float(weight_offset),
        None if mean is None else d(mean), d(rstd), None if dresidual is None else d(dresidual), dgamma, dbeta,
    )
    return dx, dgamma, dbeta


def layer_norm_backward(
    x: Any, dy: Any, mean: Any, rstd: Any, gamma: Any = None, *, weight_offset: float = 0.0,
    dresidual: Any = None, out: Any = None, out_dtype: Any = None, context: Optional[Context] = None,
) -> Tuple[Any, Any, Any]:
    """(dx, dgamma, dbeta) of LayerNorm, x the row normalized (h with a fused residual), mean and
    rstd the forward's (layer_norm(..., return_stats=True)). dresidual (the gradient arriving at
    residual_out) is added to dx. dgamma and dbeta are float32 sums over the rows."""
    return _norm_backward(_ext.LAYER_NORM, x, dy, mean, rstd, gamma, weight_offset, dresidual, out, out_dtype, context)


def rms_norm_backward(
    x: Any, dy: Any, rstd: Any, gamma: Any = None, *, weight_offset: float = 0.0,
    dresidual: Any = None, out: Any = None, out_dtype: Any = None, context: Optional[Context] = None,
) -> Tuple[Any, Any]:
    """(dx, dgamma) of RMSNorm, as layer_norm_backward."""
    dx, dgamma, _ = _norm_backward(_ext.RMS_NORM, x, dy, None, rstd, gamma, weight_offset, dresidual, out, out_dtype, context)
    return dx, dgamma
