"""Time of one small call (softmax of 8 x 128 float32 rows, CPU) through the package, against
the extension alone, numpy's own arithmetic and torch's own softmax (when installed). Best of 5
runs of timeit; ns per call. abi_softmax_call.cpp gives the C ABI's own time.

  python3 call_overhead.py          the CPU case
  python3 call_overhead.py cuda     1 x 4096 bf16 torch tensors on the GPU (softmax, the norms):
                                    host time per call of many calls in a row, the stream drained
                                    at the end of each run
"""
import sys
import timeit

import numpy as np

import onlinenorm
from onlinenorm import _onlinenorm as _ext


def best_ns(fn, number=20000):
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e9


def numpy_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def gpu_main():
    import torch

    import onlinenorm.torch as ot

    t = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    u = torch.empty_like(t)
    w = torch.rand(4096, device="cuda", dtype=torch.bfloat16)
    b = torch.rand(4096, device="cuda", dtype=torch.bfloat16)
    F = torch.nn.functional
    rows = [
        ("onlinenorm.softmax(t), new output", lambda: onlinenorm.softmax(t)),
        ("onlinenorm.softmax(t, out=u)", lambda: onlinenorm.softmax(t, out=u)),
        ("onlinenorm.torch.softmax(t) (custom op)", lambda: ot.softmax(t)),
        ("torch.softmax(t, -1)", lambda: torch.softmax(t, -1)),
        ("onlinenorm.rms_norm(t, w, out=u)", lambda: onlinenorm.rms_norm(t, w, out=u)),
        ("torch F.rms_norm(t, (4096,), w)", lambda: F.rms_norm(t, (4096,), w, 1e-6)),
        ("onlinenorm.layer_norm(t, w, b, out=u)", lambda: onlinenorm.layer_norm(t, w, b, out=u)),
        ("torch F.layer_norm(t, (4096,), w, b)", lambda: F.layer_norm(t, (4096,), w, b)),
    ]
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, 1 x 4096 bf16")
    for name, fn in rows:
        def calls(fn=fn, n=2000):
            for _ in range(n):
                fn()
            torch.cuda.synchronize()
        calls()
        print(f"{min(timeit.repeat(calls, number=1, repeat=5)) / 2000 * 1e9:8.0f} ns  {name}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "cuda":
        return gpu_main()
    x = np.random.default_rng(0).standard_normal((8, 128), dtype=np.float32)
    y = np.empty_like(x)
    ctx = onlinenorm.Context("cpu")
    rows = [
        ("onlinenorm.softmax(x) numpy, new output", lambda: onlinenorm.softmax(x)),
        ("onlinenorm.softmax(x, out=y) numpy", lambda: onlinenorm.softmax(x, out=y)),
        ("extension _onlinenorm.softmax(ctx, x, y) numpy", lambda: _ext.softmax(ctx._ctx, x, y, False)),
        ("numpy exp/max/sum softmax", lambda: numpy_softmax(x)),
    ]
    try:
        import torch

        import onlinenorm.torch as ot

        t = torch.from_numpy(x.copy())
        u = torch.empty_like(t)
        rows += [
            ("onlinenorm.softmax(t) torch, new output", lambda: onlinenorm.softmax(t)),
            ("onlinenorm.softmax(t, out=u) torch", lambda: onlinenorm.softmax(t, out=u)),
            ("onlinenorm.torch.softmax(t) (custom op)", lambda: ot.softmax(t)),
            ("torch.softmax(t, -1)", lambda: torch.softmax(t, -1)),
        ]
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    except ImportError:
        print("torch not installed: its rows are left out")
    print(f"numpy {np.__version__}, {ctx.name}")
    for name, fn in rows:
        print(f"{best_ns(fn):8.0f} ns  {name}")


if __name__ == "__main__":
    main()
