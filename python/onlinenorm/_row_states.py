"""Partial row states (docs/API.md, "partial row states"): a row split into column slices (a
vocabulary or hidden dimension sharded across devices, or any split of the caller's) is
normalized by each slice's state, the states merged in a fixed order, and each slice finished
with its row's merged state.

How the states are held, one per row (x.shape[:-1]):
- softmax: float32 (..., 2), [..., 0] the row's max and [..., 1] the sum of exp(x - max);
- moments: numpy, the structured dtype MOMENTS_STATE (count int64, mean float64, m2 float64);
  torch tensors, float64 (..., 3) holding the same memory, mean at [..., 1], m2 at [..., 2] and
  count's int64 bits at [..., 0] (state.view(torch.int64)[..., 0] reads it).
Both are the C structs' exact memory, so states round-trip through the library bit for bit.
"""
from __future__ import annotations

import sys
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import _arrays
from . import _onlinenorm as _ext
from ._context import Context, context_for
from ._forward import _KINDS, _QUANTIZED, NormResult

MOMENTS_STATE = np.dtype([("count", "<i8"), ("mean", "<f8"), ("m2", "<f8")])


def _is_structured(a: Any) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.names is not None


def _moments_memory(state: Any, name: str) -> Any:
    """A moments state as the extension takes it: float64 words (count's bits first)."""
    if _is_structured(state):
        if state.dtype != MOMENTS_STATE:
            raise TypeError(f"{name}: structured dtype {state.dtype} is not onlinenorm.MOMENTS_STATE")
        return np.ascontiguousarray(state).reshape(-1).view(np.float64)
    if isinstance(state, np.ndarray) and state.dtype == np.float64 and state.shape[-1:] == (3,):
        return state  # the torch layout in numpy: taken as it is
    return _arrays.for_dlpack(state)


def _new_moments(like: Any, rows_shape: tuple) -> tuple:
    """(the state array the caller gets, the memory the extension writes)."""
    if _arrays.is_torch(like):
        state = _arrays.empty(like, rows_shape + (3,), "float64")
        return state, _arrays.for_dlpack(state)
    _arrays.empty(like, (0,), "float32")  # refuses memory numpy cannot hold, as every output does
    state = np.empty(rows_shape, MOMENTS_STATE)
    return state, state.reshape(-1).view(np.float64)


def _moments_rows_shape(state: Any) -> tuple:
    return tuple(state.shape) if _is_structured(state) else tuple(state.shape[:-1])


def softmax_stats(x: Any, *, context: Optional[Context] = None) -> Any:
    """Each row's softmax state (max, sum of exp(x - max)): float32 (..., 2). A slice with no
    columns gives the identity state (-inf, 0)."""
    ctx = context_for(x, context)
    states = _arrays.empty(x, tuple(x.shape[:-1]) + (2,), "float32")
    _ext.softmax_stats(ctx, _arrays.for_dlpack(x), _arrays.for_dlpack(states))
    return states


def moments_stats(x: Any, *, context: Optional[Context] = None) -> Any:
    """Each row's moments (count, mean, M2 = sum (x - mean)^2), kept in double; the module's
    docstring says how they are held. A slice with no columns gives (0, 0, 0)."""
    ctx = context_for(x, context)
    state, memory = _new_moments(x, tuple(x.shape[:-1]))
    _ext.moments_stats(ctx, _arrays.for_dlpack(x), memory)
    return state


def _stacked(parts: Union[Sequence[Any], Any]) -> Any:
    """The parts as one array with a leading parts axis (an array given is taken as that)."""
    if not isinstance(parts, (list, tuple)):
        return parts
    if not parts:
        raise ValueError("parts: needs at least one state array (the states' shape comes from it)")
    shapes = {tuple(p.shape) for p in parts}
    if len(shapes) != 1:
        raise ValueError(f"parts: the state arrays have different shapes {sorted(shapes)}")
    if _arrays.is_torch(parts[0]):
        return sys.modules["torch"].stack(list(parts))
    return np.stack([np.asarray(p) if isinstance(p, np.ndarray) else np.from_dlpack(p) for p in parts])


def softmax_merge(parts: Union[Sequence[Any], Any], *, context: Optional[Context] = None) -> Any:
    """The softmax states of the slices of each row merged, left to right: a list of
    softmax_stats results (one per slice) or one array (parts, ..., 2)."""
    stacked = _stacked(parts)
    if len(stacked.shape) < 2 or stacked.shape[-1] != 2:
        raise ValueError(f"parts: softmax states have shape (parts, ..., 2), got {tuple(stacked.shape)}")
    rows_shape = tuple(stacked.shape[1:-1])
    rows = int(np.prod(rows_shape, dtype=np.int64))
    ctx = context_for(stacked, context)
    out = _arrays.empty(stacked, rows_shape + (2,), "float32")
    d = _arrays.for_dlpack
    _ext.softmax_merge(ctx, int(stacked.shape[0]), rows, d(stacked), d(out))
    return out


def moments_merge(parts: Union[Sequence[Any], Any], *, context: Optional[Context] = None) -> Any:
    """The moments of the slices of each row merged (Chan's combine), left to right: a list of
    moments_stats results or one array with a leading parts axis."""
    stacked = _stacked(parts)
    rows_shape = _moments_rows_shape(stacked)[1:]
    if not _is_structured(stacked) and tuple(stacked.shape[-1:]) != (3,):
        raise ValueError(f"parts: moments states have shape (parts, ..., 3), got {tuple(stacked.shape)}")
    rows = int(np.prod(rows_shape, dtype=np.int64))
    ctx = context_for(stacked, context)
    out, memory = _new_moments(stacked, rows_shape)
    _ext.moments_merge(ctx, int(stacked.shape[0]), rows, _moments_memory(stacked, "parts"), memory)
    return out


def softmax_finish(
    x: Any, state: Any, log: bool = False, *, out: Any = None, out_dtype: Any = None,
    context: Optional[Context] = None,
) -> Any:
    """softmax (or log_softmax with log) of the slice x with each row's merged state; out and
    out_dtype as in softmax."""
    ctx = context_for(x, context)
    y = _arrays.output(x, x.shape, out, out_dtype)
    d = _arrays.for_dlpack
    _ext.softmax_finish(ctx, d(x), d(state), bool(log), d(y))
    return y


def norm_finish(
    x: Any,
    state: Any,
    kind: str = "layer_norm",
    gamma: Any = None,
    beta: Any = None,
    eps: Optional[float] = None,
    *,
    weight_offset: float = 0.0,
    out: Any = None,
    out_dtype: Any = None,
    y_static_scale: Optional[float] = None,
    context: Optional[Context] = None,
) -> NormResult:
    """The norm of `kind` of the slice x with each row's merged moments: gamma and beta are the
    slice's own columns; eps (default 1e-5 LayerNorm, 1e-6 RMSNorm), weight_offset and a
    quantized y with y_static_scale as in norm (a dynamic scale needs the whole row: the library
    refuses it). Returns a NormResult (residual_out and y_scale None)."""
    if kind not in _KINDS:
        raise ValueError(f"kind: {kind!r} is none of {', '.join(_KINDS)}")
    if eps is None:
        eps = 1e-5 if kind == "layer_norm" else 1e-6
    ctx = context_for(x, context)
    memory = _moments_memory(state, "state")
    y = _arrays.output(x, x.shape, out, out_dtype)
    stats_shape = tuple(x.shape[:-1])
    mean = _arrays.empty(x, stats_shape, "float32") if kind == "layer_norm" else None
    rstd = _arrays.empty(x, stats_shape, "float32")
    y_name = _arrays.dtype_name(y)
    y_dtype, y_passed = -1, y
    if y_name == "float8_e4m3fn":  # crosses as its bytes, as in norm
        y_dtype, y_passed = _QUANTIZED[y_name], _arrays.raw_bytes(y)
    d = _arrays.for_dlpack
    _ext.norm_finish(
        ctx, _KINDS[kind], d(x), memory, d(y_passed), y_dtype,
        None if gamma is None else d(gamma), None if beta is None else d(beta),
        float(eps), float(weight_offset), mean, rstd, 0.0 if y_static_scale is None else float(y_static_scale),
    )
    return NormResult(y, None, mean, rstd, None)
