"""compare(): `onorm compare` (tools/compare.cpp, linked into the extension) as a dict."""
from __future__ import annotations

import json
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np

from . import _onlinenorm as _ext


def _dtype_text(value: Any, name: str) -> str:
    """A dtype as the tool takes it: a string as given ("f32", "bfloat16", ...), else numpy's name."""
    if isinstance(value, str):
        return value
    try:
        return np.dtype(value).name
    except TypeError:
        raise ValueError(f"{name}: {value!r} is not a dtype") from None


def compare(
    op: str,
    rows: Optional[int] = None,
    cols: Optional[int] = None,
    *,
    x: Any = None,
    dtype: Any = None,
    out_dtype: Any = None,
    backends: Union[str, Sequence[str], None] = None,
    dist: Optional[str] = None,
    seed: int = 1,
    iters: int = 10,
    eps: float = 1e-5,
    weight_offset: float = 0.0,
    param_dtype: Any = None,
) -> Dict[str, Any]:
    """Runs one op on several backends over the same input and checks each against the float64
    reference, as `onorm compare --json` does; returns its document (schema "onorm-compare/1",
    tools/README.md) as a dict: per backend time, bandwidth, max abs/rel/ulp error, bound_ok,
    bitwise differences from the others; bound_ok and errors overall.

    op: any `onorm compare --op` name (softmax, layer_norm, rms_norm_fp8, rms_norm_backward, ...).
    The input is generated (rows, cols, dist: normal | uniform | large-offset | special, seed), or
    x: a 2-D float32/float16/float64 array (uint16 bf16 bits with dtype="bf16"), as --input reads
    a file. dtype: f32 | f16 | bf16 | f64 (or numpy's names); default f32, or x's. backends: "cpu",
    "cuda:1", a comma-separated string or a list; a repeat checks determinism; default every
    available one. A backend that fails to run the problem gets its "error" in the dict.
    ValueError for a bad argument (the tool's message, which names its options), RuntimeError for
    an unavailable backend.
    """
    options = {"op": str(op), "seed": str(seed), "iters": str(iters), "eps": repr(float(eps))}
    if rows is not None:
        options["rows"] = str(rows)
    if cols is not None:
        options["cols"] = str(cols)
    if dtype is not None:
        options["dtype"] = _dtype_text(dtype, "dtype")
    if out_dtype is not None:
        options["out-dtype"] = _dtype_text(out_dtype, "out_dtype")
    if param_dtype is not None:
        options["param-dtype"] = _dtype_text(param_dtype, "param_dtype")
    if float(weight_offset) != 0.0:  # the tool refuses it for the ops without one
        options["weight-offset"] = repr(float(weight_offset))
    if backends is not None:
        options["backends"] = backends if isinstance(backends, str) else ",".join(backends)
    if dist is not None:
        options["dist"] = str(dist)
    if x is not None:
        options["input"] = "x"  # names x in the tool's messages
        x = np.ascontiguousarray(x)
    return json.loads(_ext.compare(options, x))
