"""onlinenorm: softmax, log-softmax, LayerNorm, RMSNorm and their backward passes, cross-entropy,
softmax top-k and partial row states over the last axis of numpy arrays, torch tensors or any
DLPack array, computed by the onlinenorm library (its C ABI) on the CPU, CUDA or HIP.
onlinenorm.torch adds torch ops with autograd and modules; compare() checks one op on every
backend against a float64 reference (onorm compare)."""
from ._backward import layer_norm_backward, log_softmax_backward, rms_norm_backward, softmax_backward
from ._compare import compare
from ._context import Context, info
from ._cross_entropy import CrossEntropyResult, cross_entropy
from ._forward import NormResult, layer_norm, log_softmax, norm, rms_norm, softmax
from ._onlinenorm import API_VERSION
from ._row_states import (
    MOMENTS_STATE, moments_merge, moments_stats, norm_finish, softmax_finish, softmax_merge, softmax_stats,
)
from ._softmax_topk import softmax_topk

__version__ = "0.1.0"

__all__ = [
    "API_VERSION",
    "Context",
    "CrossEntropyResult",
    "MOMENTS_STATE",
    "NormResult",
    "compare",
    "cross_entropy",
    "info",
    "layer_norm",
    "layer_norm_backward",
    "log_softmax",
    "log_softmax_backward",
    "moments_merge",
    "moments_stats",
    "norm",
    "norm_finish",
    "rms_norm",
    "rms_norm_backward",
    "softmax",
    "softmax_backward",
    "softmax_finish",
    "softmax_merge",
    "softmax_stats",
    "softmax_topk",
]
