"""Softmax top-k over the last axis (MoE routing, sampling): the k largest entries only."""
from __future__ import annotations

import operator
from typing import Any, Optional, Tuple

from . import _arrays
from . import _onlinenorm as _ext
from ._context import Context, context_for


def softmax_topk(
    x: Any,
    k: int,
    renormalize: bool = False,
    *,
    out: Any = None,
    out_dtype: Any = None,
    context: Optional[Context] = None,
) -> Tuple[Any, Any]:
    """(values, indices) of each row's k largest entries in descending order (ties: the lower
    column first), as onorm_softmax_topk (docs/API.md, "softmax top-k"). values (..., k): their
    softmax over the whole row, or with renormalize over the k selected logits alone; `out`, else
    a new array of dtype out_dtype (default x's). indices (..., k): int64 columns.
    1 <= k <= x.shape[-1]."""
    k = operator.index(k)
    if not x.shape or not 1 <= k <= x.shape[-1]:
        cols = x.shape[-1] if x.shape else 0
        raise ValueError(f"k: {k} is outside [1, {cols}] (the columns of x)")
    ctx = context_for(x, context)
    shape = tuple(x.shape[:-1]) + (k,)
    values = _arrays.output(x, shape, out, out_dtype)
    indices = _arrays.empty(x, shape, "int64")
    d = _arrays.for_dlpack
    _ext.softmax_topk(ctx, d(x), k, bool(renormalize), d(values), d(indices))
    return values, indices
