"""Arrays of any DLPack framework: their device and dtype, and new arrays in the same framework."""
from __future__ import annotations

import sys
from typing import Any, Optional, Sequence

import numpy as np

# DLPack device types (dlpack.h).
DLPACK_CPU = 1
DLPACK_CUDA = 2
DLPACK_CUDA_HOST = 3
DLPACK_ROCM = 10
DLPACK_CUDA_MANAGED = 13

# The dtypes the C ABI takes, as numpy and torch spell them.
DTYPE_NAMES = ("float32", "float16", "bfloat16", "float64", "int8", "float8_e4m3fn")


# ml_dtypes' dtypes, which numpy cannot export through DLPack.
_NOT_DLPACK = ("bfloat16", "float8_e4m3fn")


def is_torch(a: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(a, torch.Tensor)


def for_dlpack(a: Any) -> Any:
    """The array as nanobind takes it. A torch tensor that requires grad goes detached (the plain
    functions record no autograd: onlinenorm.torch does)."""
    if is_torch(a):
        # torch's own capsule export: a third of the time of its __dlpack__ protocol method.
        return sys.modules["torch"].utils.dlpack.to_dlpack(a.detach() if a.requires_grad else a)
    if isinstance(a, np.ndarray) and _numpy_name(a.dtype) in _NOT_DLPACK:
        raise TypeError(f"numpy {a.dtype.name} arrays (ml_dtypes) cannot cross DLPack: use torch tensors for {a.dtype.name}")
    return a


def device_of(a: Any, name: str) -> tuple:
    """(DLPack device type, device number) of an array; TypeError for what is not an array."""
    if is_torch(a):  # faster than torch's __dlpack_device__ (and than building a.device)
        if a.is_cuda:
            return (DLPACK_ROCM if sys.modules["torch"].version.hip else DLPACK_CUDA), a.get_device()
        if a.is_cpu:
            return DLPACK_CPU, 0
    try:
        device_type, device_id = a.__dlpack_device__()
    except AttributeError:
        raise TypeError(f"{name}: a {type(a).__name__} is not an array (it has no __dlpack_device__)") from None
    return int(device_type), int(device_id)


_numpy_names: dict = {}


def _numpy_name(dtype: np.dtype) -> str:
    # np.dtype.name builds its string at each call (microseconds): a small call should not pay it.
    name = _numpy_names.get(dtype)
    if name is None:
        name = _numpy_names[dtype] = dtype.name
    return name


def dtype_name(a: Any) -> str:
    """An array's dtype as numpy names it ("float32", "bfloat16", ...)."""
    if is_torch(a):
        return str(a.dtype).replace("torch.", "")
    dtype = getattr(a, "dtype", None)
    if isinstance(dtype, np.dtype):
        return _numpy_name(dtype)
    return np.from_dlpack(a).dtype.name


def normalize_dtype(dtype: Any) -> str:
    """A dtype given as a string, a numpy dtype or type, or a torch dtype, as its numpy name."""
    if isinstance(dtype, str):
        name = dtype
    elif type(dtype).__module__ == "torch":
        name = str(dtype).replace("torch.", "")
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            raise TypeError(f"out_dtype: {dtype!r} is not a dtype") from None
    if name not in DTYPE_NAMES:
        raise TypeError(f"out_dtype: {name} is none of {', '.join(DTYPE_NAMES)}")
    return name


def _numpy_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        raise TypeError("numpy has no bfloat16 that crosses DLPack: use torch tensors for bfloat16")
    if name == "float8_e4m3fn":  # a quantized output only, passed as its bytes
        try:
            import ml_dtypes
        except ImportError:
            raise TypeError("numpy has no float8_e4m3fn: install ml_dtypes, or use torch tensors") from None
        return np.dtype(ml_dtypes.float8_e4m3fn)
    return np.dtype(name)


def empty(like: Any, shape: Sequence[int], dtype: str) -> Any:
    """A new array of the framework and device of `like`: torch for torch tensors, numpy for
    every other array in host memory."""
    if is_torch(like):
        import torch

        return torch.empty(tuple(shape), dtype=getattr(torch, dtype), device=like.device)
    device_type, _ = device_of(like, "x")
    if device_type not in (DLPACK_CPU, DLPACK_CUDA_HOST):
        raise TypeError(f"cannot allocate an output for a {type(like).__name__} on DLPack device {device_type}: pass out=")
    return np.empty(tuple(shape), dtype=_numpy_dtype(dtype))


def output(like: Any, shape: Sequence[int], out: Optional[Any], dtype: Optional[Any], name: str = "out") -> Any:
    """`out` checked against the shape (and dtype, when one is asked for), or a new array."""
    wanted = normalize_dtype(dtype) if dtype is not None else None
    if out is None:
        if wanted is None and is_torch(like) and tuple(like.shape) == tuple(shape):  # the common case
            torch = sys.modules["torch"]
            return torch.empty_like(like, memory_format=torch.contiguous_format)
        return empty(like, shape, wanted or dtype_name(like))
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{name}: has shape {tuple(out.shape)}, needs {tuple(shape)}")
    if isinstance(out, np.ndarray) and not out.flags.writeable:
        raise ValueError(f"{name}: is read-only")
    if wanted is not None and dtype_name(out) != wanted:
        raise TypeError(f"{name}: has dtype {dtype_name(out)}, but out_dtype asks for {wanted}")
    return out


def raw_bytes(a: Any) -> Any:
    """The array's bytes as uint8 (float8 crosses DLPack where a framework cannot export it)."""
    return a.view(np.uint8) if isinstance(a, np.ndarray) else a.view(sys.modules["torch"].uint8)
