"""Cross-entropy over the last axis (the classes), loss and gradient in one pass."""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Union

from . import _arrays
from . import _onlinenorm as _ext
from ._context import Context, context_for


class CrossEntropyResult(NamedTuple):
    """What `cross_entropy` computed: the per-row loss (float32, logits.shape[:-1]), the per-row
    log-sum-exp (float32, or None unless return_lse) and the gradient of
    sum(grad_scale * loss) with respect to the logits (or None unless asked)."""

    loss: Any
    lse: Any
    grad: Any


def _check_targets(logits: Any, targets: Any) -> None:
    rows_shape = tuple(logits.shape[:-1])
    if tuple(targets.shape) != rows_shape:
        raise ValueError(f"targets: has shape {tuple(targets.shape)}, needs logits.shape[:-1] = {rows_shape}")
    if _arrays.dtype_name(targets) != "int64":
        raise TypeError(f"targets: has dtype {_arrays.dtype_name(targets)}, needs int64")


def cross_entropy(
    logits: Any,
    targets: Any,
    *,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    z_loss: float = 0.0,
    grad_scale: float = 1.0,
    return_lse: bool = False,
    grad: Union[bool, Any] = False,
    grad_dtype: Any = None,
    in_place: bool = False,
    context: Optional[Context] = None,
) -> Union[Any, CrossEntropyResult]:
    """Per-row cross-entropy of logits (..., C) against int64 class indices targets (...), as
    onorm_cross_entropy (docs/API.md, "cross-entropy"): with lse = log sum_j exp(x_j) and
    q_j = (1 - label_smoothing) [j == t] + label_smoothing / C,
    loss = lse - sum_j q_j x_j + z_loss * lse^2, and the gradient of sum(grad_scale * loss),
    grad_scale * ((1 + 2 z_loss lse) softmax(x) - q), computed in the same pass.

    Rows whose target is ignore_index get loss 0 and a zero gradient row; a target outside [0, C)
    gives that row NaN. grad: False (none), True (a new array, of grad_dtype, default the
    logits'), or an array that receives it; in_place=True writes it over the logits.
    Returns the loss (float32), or a CrossEntropyResult when lse or the gradient is asked for.
    """
    if in_place and grad is not False:
        raise ValueError("grad: in_place=True writes the gradient over the logits; pass one of the two")
    ctx = context_for(logits, context)
    _check_targets(logits, targets)
    rows_shape = tuple(logits.shape[:-1])
    if in_place:
        dlogits = _arrays.output(logits, logits.shape, logits, None, "logits (in_place)")
    elif grad is True:
        dlogits = _arrays.output(logits, logits.shape, None, grad_dtype)
    elif grad is False or grad is None:
        dlogits = None
    else:
        dlogits = _arrays.output(logits, logits.shape, grad, grad_dtype, "grad")
    loss = _arrays.empty(logits, rows_shape, "float32")
    lse = _arrays.empty(logits, rows_shape, "float32") if return_lse else None
    d = _arrays.for_dlpack
    _ext.cross_entropy(
        ctx, d(logits), d(targets), d(loss), None if lse is None else d(lse), None if dlogits is None else d(dlogits),
        int(ignore_index), float(label_smoothing), float(z_loss), float(grad_scale),
    )
    if lse is None and dlogits is None:
        return loss
    return CrossEntropyResult(loss, lse, dlogits)
