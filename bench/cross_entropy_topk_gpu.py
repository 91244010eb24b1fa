#!/usr/bin/env python3
"""Cross-entropy (loss and gradient) and softmax top-k on a GPU, onlinenorm beside PyTorch eager,
torch.compile, quack and Liger-Kernel (cross-entropy; where importable) in one process (issue 15),
timed with triton.testing.do_bench (median, L2 flushed between runs) beside a copy of the same
bytes (the faster of Tensor.copy_ and a Triton copy of 16 bytes per lane).

  python3 bench/cross_entropy_topk_gpu.py --lib build/lib/libonlinenorm.so --csv OUT.csv
      [--ce-shapes 4096x4096,...] [--topk-shapes ...] [--systems onorm,eager,compile,quack,liger]
      [--dtypes bf16,f32]

onlinenorm is called through its C ABI (ctypes) on torch's tensors and current stream.
Bytes: cross-entropy reads the logits and writes the gradient (in place over the logits for
onlinenorm, quack and Liger; torch writes a new tensor); top-k reads the logits (values and
indices are small).
"""
import argparse
import csv
import ctypes
import sys

import importlib

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from peers_gpu import copy_kernel  # bench/, beside this script

CE_SHAPES = [(4096, 4096), (4096, 32768), (4096, 131072), (1024, 262144), (64, 1048576)]
TOPK_SHAPES = [(4096, 32768), (4096, 131072), (1024, 262144)]
DTYPES = {"bf16": (torch.bfloat16, 2), "f32": (torch.float32, 0)}


class Rows(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("rows", ctypes.c_int64),
                ("cols", ctypes.c_int64), ("row_stride", ctypes.c_int64)]


class CeArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("targets", ctypes.c_void_p), ("ignore_index", ctypes.c_int64),
                ("label_smoothing", ctypes.c_double), ("z_loss", ctypes.c_double), ("loss", ctypes.c_void_p),
                ("lse", ctypes.c_void_p), ("dlogits", ctypes.POINTER(Rows)), ("grad_scale", ctypes.c_double)]


def rows_of(t, code):
    return Rows(t.data_ptr(), code, t.shape[0], t.shape[1], t.stride(0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--ce-shapes", default=",".join(f"{r}x{c}" for r, c in CE_SHAPES))
    ap.add_argument("--topk-shapes", default=",".join(f"{r}x{c}" for r, c in TOPK_SHAPES))
    ap.add_argument("--systems", default="onorm,eager,compile,quack,liger")
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    a = ap.parse_args()
    shapes = lambda arg: [tuple(int(v) for v in t.split("x")) for t in arg.split(",") if t]
    systems = a.systems.split(",")
    peers = {}
    for name, module in (("quack", "quack.cross_entropy"), ("liger", "liger_kernel.ops.cross_entropy")):
        if name in systems:
            try:
                peers[name] = importlib.import_module(module)
            except Exception as e:  # noqa: BLE001  (reported; the others still run)
                print(f"{name}: import failed: {e}", flush=True)
    lib = ctypes.CDLL(a.lib)
    ctx = ctypes.c_void_p()
    assert lib.onorm_create(2, 0, ctypes.byref(ctx)) == 0, "onorm_create(cuda)"
    lib.onorm_set_stream(ctx, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    lib.onorm_last_error.restype = ctypes.c_char_p
    import torch._dynamo as dynamo
    dynamo.config.cache_size_limit = 100000
    out = []

    triton_copy = copy_kernel()

    def copy_us(nbytes):
        """A copy of nbytes (nbytes read and nbytes written): the faster of copy_ and Triton's."""
        src = torch.empty(nbytes // 4, dtype=torch.int32, device="cuda")
        dst = torch.empty_like(src)
        return min(do_bench(lambda: dst.copy_(src)), do_bench(lambda: triton_copy(src, dst))) * 1e3

    dtypes = {n: DTYPES[n] for n in a.dtypes.split(",")}
    for name, (dt, code) in dtypes.items():
        for rows, cols in shapes(a.ce_shapes):
            x = torch.randn(rows, cols, device="cuda", dtype=dt)
            t = torch.randint(0, cols, (rows,), device="cuda")
            loss = torch.empty(rows, device="cuda")
            xr = rows_of(x, code)
            args = CeArgs()
            lib.onorm_cross_entropy_args_init(ctypes.byref(args))
            args.targets, args.loss, args.dlogits = t.data_ptr(), loss.data_ptr(), ctypes.pointer(xr)
            args.grad_scale = 1.0 / rows

            def ours():
                s = lib.onorm_cross_entropy(ctx, ctypes.byref(xr), ctypes.byref(args))
                assert s == 0, lib.onorm_last_error()

            def eager(x=x, t=t):
                xg = x.detach().requires_grad_()
                l = F.cross_entropy(xg.float(), t)
                return torch.autograd.grad(l, xg)[0]

            fns = {"onorm": ours, "eager": eager}
            if "compile" in systems:
                fns["compile"] = torch.compile(eager, dynamic=False)
            if "quack" in peers:  # loss and the gradient written over the logits
                fns["quack"] = lambda x=x, t=t: peers["quack"].cross_entropy_fwd(x, t, return_dx=True,
                                                                                   inplace_backward=True)
            if "liger" in peers:  # its forward writes the gradient over the logits where they require grad
                xl = x.detach().requires_grad_()
                fns["liger"] = lambda xl=xl, t=t: peers["liger"].cross_entropy_forward(xl, t, None, -100, 0.0, 0.0,
                                                                                       "mean", None, False)
            nbytes = 2 * x.numel() * x.element_size()
            base = copy_us(x.numel() * x.element_size())
            times = {}
            for sys_, fn in fns.items():
                if sys_ not in systems:
                    continue
                try:
                    times[sys_] = do_bench(fn) * 1e3
                except Exception as e:  # noqa: BLE001
                    print(f"{sys_} cross_entropy {name} {rows}x{cols} failed: {type(e).__name__}: {e}", flush=True)
            for sys_, us in times.items():
                out.append(dict(op="cross_entropy", dtype=name, rows=rows, cols=cols, system=sys_, us=round(us, 2),
                                tbps=round(nbytes / us / 1e6, 3), copy_us=round(base, 2),
                                pct_copy=round(100 * base / us, 1)))
                print(",".join(str(v) for v in out[-1].values()), flush=True)  # kept if a later case stops the run
            del x
    for name, (dt, code) in dtypes.items():
        for rows, cols in shapes(a.topk_shapes):
            for k in (8, 64):
                x = torch.randn(rows, cols, device="cuda", dtype=dt)
                vals = torch.empty(rows, k, device="cuda", dtype=dt)
                idx = torch.empty(rows, k, device="cuda", dtype=torch.int64)
                xr, vr = rows_of(x, code), rows_of(vals, code)

                def ours():
                    s = lib.onorm_softmax_topk(ctx, ctypes.byref(xr), ctypes.c_int64(k), 0, ctypes.byref(vr),
                                               ctypes.c_void_p(idx.data_ptr()))
                    assert s == 0, lib.onorm_last_error()

                def eager(x=x, k=k):
                    return torch.topk(torch.softmax(x, dim=-1), k, dim=-1)

                nbytes = x.numel() * x.element_size()
                base = copy_us(nbytes) / 2  # a read of the bytes: half a copy of them
                times = {"onorm": do_bench(ours) * 1e3, "eager": do_bench(eager) * 1e3}
                if "compile" in systems:
                    times["compile"] = do_bench(torch.compile(eager, dynamic=False)) * 1e3
                for sys_, us in times.items():
                    out.append(dict(op=f"softmax_topk{k}", dtype=name, rows=rows, cols=cols, system=sys_,
                                    us=round(us, 2), tbps=round(nbytes / us / 1e6, 3), copy_us=round(base, 2),
                                    pct_copy=round(100 * base / us, 1)))
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out[0].keys()))
        w.writeheader()
        w.writerows(out)
    for r in out:
        print(",".join(str(v) for v in r.values()))


if __name__ == "__main__":
    sys.exit(main())
