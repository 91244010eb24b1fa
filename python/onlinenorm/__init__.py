"""onlinenorm: softmax, log-softmax, LayerNorm, RMSNorm and their backward passes over the last
axis of numpy arrays, torch tensors or any DLPack array, computed by the onlinenorm library
(its C ABI) on the CPU, CUDA or HIP. onlinenorm.torch adds torch ops with autograd and modules;
compare() checks one op on every backend against a float64 reference (onorm compare)."""
from ._backward import layer_norm_backward, log_softmax_backward, rms_norm_backward, softmax_backward
from ._compare import compare
from ._context import Context, info
from ._forward import NormResult, layer_norm, log_softmax, norm, rms_norm, softmax
from ._onlinenorm import API_VERSION

__version__ = "0.1.0"

__all__ = [
    "API_VERSION",
    "Context",
    "NormResult",
    "compare",
    "info",
    "layer_norm",
    "layer_norm_backward",
    "log_softmax",
    "log_softmax_backward",
    "norm",
    "rms_norm",
    "rms_norm_backward",
    "softmax",
    "softmax_backward",
]
