"""Contexts (a backend and a device of the library) and the default one for an array."""
from __future__ import annotations

import sys
import threading
from typing import Any, Dict, Optional, Tuple

from . import _arrays
from . import _onlinenorm as _ext

BACKENDS = {"auto": _ext.BACKEND_AUTO, "cpu": _ext.BACKEND_CPU, "cuda": _ext.BACKEND_CUDA, "hip": _ext.BACKEND_HIP}
_NAMES = {v: k for k, v in BACKENDS.items()}


class Context:
    """One backend and device of the library.

    backend: "auto" (the environment variable ONLINENORM_BACKEND, else a GPU before the CPU),
    "cpu", "cuda" or "hip"; device: the GPU's number. An unavailable backend raises RuntimeError
    with the library's reason. Arrays passed with a context must live where it computes.
    """

    def __init__(self, backend: str = "auto", device: int = 0) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend: {backend!r} is none of {', '.join(BACKENDS)}")
        self._ctx = _ext.Context(BACKENDS[backend], int(device))
        self._stream = 0  # the library's default: the legacy default stream

    @property
    def name(self) -> str:
        """The library's name of it, e.g. "cpu (AVX2, 2 threads)" or "cuda:0 (NVIDIA H100)"."""
        return self._ctx.name

    @property
    def backend(self) -> str:
        """"cpu", "cuda" or "hip" (never "auto": what was chosen)."""
        return _NAMES[self._ctx.kind]

    @property
    def device(self) -> int:
        return self._ctx.device

    def set_stream(self, stream: int) -> None:
        """Orders later calls on a cudaStream_t / hipStream_t given as an integer (ignored on the CPU)."""
        self._ctx.set_stream(int(stream))
        self._stream = int(stream)

    def synchronize(self) -> None:
        self._ctx.synchronize()

    def __repr__(self) -> str:
        return f"onlinenorm.Context({self.name!r})"


_defaults: Dict[Tuple[int, int], Context] = {}
_defaults_lock = threading.Lock()


def _default_for(device_type: int, device_id: int) -> Context:
    key = (device_type, device_id)
    ctx = _defaults.get(key)
    if ctx is None:
        with _defaults_lock:
            ctx = _defaults.get(key)
            if ctx is None:
                if device_type in (_arrays.DLPACK_CPU, _arrays.DLPACK_CUDA_HOST):
                    ctx = Context("cpu")
                elif device_type == _arrays.DLPACK_ROCM:
                    ctx = Context("hip", device_id)
                elif device_type in (_arrays.DLPACK_CUDA, _arrays.DLPACK_CUDA_MANAGED):
                    # HIP on its NVIDIA platform takes CUDA memory too.
                    cuda = _ext.backend_device_count(_ext.BACKEND_CUDA) > 0
                    ctx = Context("cuda" if cuda else "hip", device_id)
                else:
                    raise TypeError(f"no onlinenorm backend computes on DLPack device type {device_type}")
                _defaults[key] = ctx
    return ctx


def context_for(x: Any, context: Optional[Context]) -> Any:
    """The extension's context for a call on x: the one given, else the default for x's device.
    A torch GPU tensor's call is ordered on torch's current stream of its device."""
    device_type, device_id = _arrays.device_of(x, "x")
    ctx = context if context is not None else _default_for(device_type, device_id)
    if device_type not in (_arrays.DLPACK_CPU, _arrays.DLPACK_CUDA_HOST) and _arrays.is_torch(x):
        stream = _current_raw_stream(device_id)
        if stream != ctx._stream:
            ctx.set_stream(stream)
    return ctx._ctx


_raw_stream_of = None


def _current_raw_stream(device_id: int) -> int:
    """torch's current stream of a device as an integer: torch's raw getter (what Triton and
    Inductor call; a tenth of the time of building a torch.cuda.Stream), else the public API."""
    global _raw_stream_of
    if _raw_stream_of is None:
        torch = sys.modules["torch"]
        getter = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _raw_stream_of = getter if getter is not None else (lambda i: torch.cuda.current_stream(i).cuda_stream)
    return _raw_stream_of(device_id)


def info() -> Dict[str, Any]:
    """What this build of the library offers: API version, each backend's devices (or why it has
    none), the CPU's SIMD targets."""
    backends = {}
    for name in ("cpu", "cuda", "hip"):
        kind = BACKENDS[name]
        backends[name] = {
            "devices": _ext.backend_device_count(kind),
            "unavailable_reason": _ext.backend_unavailable_reason(kind),
        }
    return {"api_version": _ext.API_VERSION, "backends": backends, "cpu_targets": _ext.cpu_targets()}
