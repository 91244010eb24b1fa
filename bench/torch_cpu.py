#!/usr/bin/python3
"""Run with Debian's interpreter (/usr/bin/python3, where python3-torch lives).

The CPU benchmark's shapes through PyTorch (Debian's python3-torch 1.13, CPU), for the
side-by-side table in bench/RESULTS.md.

Same cases as onorm_bench_cpu: softmax, log_softmax, layer_norm (with weight and bias) and
RMSNorm (x * rsqrt(mean(x^2) + eps) * weight, PyTorch 1.13 has no fused RMSNorm), f32 and bf16
(input dtype = output dtype), widths 128 .. 1M with rows chosen so that x and y are 32 MB
each (64 MB moved), one thread and all threads. Each timed call is followed by a copy_ of the
same bytes (the memcpy reference), interleaved, so that the ratio is taken under the same
conditions on a noisy machine.

Prints one line per case and, with --json FILE, writes the numbers for tables.
"""
import argparse
import json
import os
import time

import torch

BYTES_PER_SIDE = 32 << 20
WIDTHS = [128, 1024, 4096, 16384, 131072, 1048576]
OPS = ["softmax", "log_softmax", "layer_norm", "rms_norm"]


def make_op(op, w, dtype):
    weight = (1.0 + 0.001 * (torch.arange(w) % 97)).to(dtype)
    bias = (0.01 * (torch.arange(w) % 13)).to(dtype)
    eps = 1e-5
    if op == "softmax":
        return lambda x: torch.softmax(x, dim=-1)
    if op == "log_softmax":
        return lambda x: torch.log_softmax(x, dim=-1)
    if op == "layer_norm":
        return lambda x: torch.nn.functional.layer_norm(x, (w,), weight, bias, eps)
    return lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def bench_case(op, dtype, w, threads, min_time):
    torch.set_num_threads(threads)
    esz = 4 if dtype == torch.float32 else 2
    rows = BYTES_PER_SIDE // esz // w
    x = (torch.randn(rows, w) * 2).to(dtype)
    dst = torch.empty_like(x)
    fn = make_op(op, w, dtype)
    fn(x)  # warm up
    dst.copy_(x)
    op_s = copy_s = 0.0
    iters = 0
    while op_s < min_time or iters < 3:
        t0 = time.perf_counter()
        y = fn(x)
        t1 = time.perf_counter()
        dst.copy_(x)
        t2 = time.perf_counter()
        del y
        op_s += t1 - t0
        copy_s += t2 - t1
        iters += 1
    moved = 2.0 * rows * w * esz * iters
    return moved / op_s / 1e9, moved / copy_s / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--json", help="write results here")
    ap.add_argument("--ops", default=",".join(OPS))
    args = ap.parse_args()
    all_threads = os.cpu_count() or 1
    thread_counts = [1] + ([all_threads] if all_threads > 1 else [])
    results = []
    print(f"torch {torch.__version__}, {all_threads} cpus")
    for op in args.ops.split(","):
        for dtype, dname in [(torch.float32, "f32"), (torch.bfloat16, "bf16")]:
            for w in WIDTHS:
                for t in thread_counts:
                    gbps, copy_gbps = bench_case(op, dtype, w, t, args.min_time)
                    name = f"{op}/{dname}/{w}/threads:{t}"
                    print(f"{name:36s} GBps={gbps:7.2f} copyGBps={copy_gbps:7.2f} pct_copy={100 * gbps / copy_gbps:6.1f}",
                          flush=True)
                    results.append({"name": name, "GBps": gbps, "copyGBps": copy_gbps,
                                    "pct_copy": 100 * gbps / copy_gbps})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
