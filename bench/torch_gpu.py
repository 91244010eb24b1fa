#!/usr/bin/env python3
"""PyTorch eager and torch.compile on the same shapes as bench/cuda (onorm_bench_cuda).

  python3 bench/torch_gpu.py --warm                      compile every case (fills Inductor's cache)
  python3 bench/torch_gpu.py --csv T.csv [--onorm-csv O.csv --md TABLE.md] [--ops a,b]
        time every case with triton.testing.do_bench (median, L2 flushed between runs), with a
        device-to-device copy of the same bytes as reference; with --onorm-csv, print the
        side-by-side table (onorm vs eager vs torch.compile).
Effective bandwidth counts every row tensor read or written once, like the C++ benchmark:
x and y; add_rms_norm x, the residual, h and y; rms_norm_fp8 x and a byte per element of y.
"""
import argparse
import csv
import os
import sys
import time

WIDTHS = [64, 128, 512, 1024, 4096, 8192, 16384, 32768, 131072, 262144, 1048576]
OPS = ["softmax", "log_softmax", "layer_norm", "rms_norm"]
OPTION_OPS = ["add_rms_norm", "rms_norm_fp8"]
TARGET = 256 << 20  # bytes moved per call


def allow_recompiles():
    """Every shape is its own static compile (dynamic=False); Dynamo's default limit of 8
    recompiles per code object would silently fall back to eager after the 8th width."""
    import torch._dynamo
    for knob in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                 "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 100000)


def moved_bytes(op, x_bytes, elements):
    if op == "add_rms_norm":
        return 4 * x_bytes
    if op == "rms_norm_fp8":
        return x_bytes + elements
    return 2 * x_bytes


def make_fn(op, cols):
    """fn(x, r, w, b); r: a second tensor like x (the residual)."""
    import torch
    import torch.nn.functional as F
    if op == "softmax":
        return lambda x, r, w, b: torch.softmax(x, dim=-1)
    if op == "log_softmax":
        return lambda x, r, w, b: torch.log_softmax(x, dim=-1)
    if op == "layer_norm":
        return lambda x, r, w, b: F.layer_norm(x, (cols,), w, b, 1e-5)
    if op == "add_rms_norm":
        def add_rms_norm(x, r, w, b):
            h = x + r
            return F.rms_norm(h, (cols,), w, 1e-5), h
        return add_rms_norm
    if op == "rms_norm_fp8":
        def rms_norm_fp8(x, r, w, b):
            y = F.rms_norm(x, (cols,), w, 1e-5).float()
            scale = y.abs().amax(dim=-1, keepdim=True) / 448.0
            return (y / scale).to(torch.float8_e4m3fn), scale
        return rms_norm_fp8
    return lambda x, r, w, b: F.rms_norm(x, (cols,), w, 1e-5)


def cases():
    for dt in ("f32", "bf16"):
        for cols in WIDTHS:
            for op in OPS:
                yield op, dt, cols


def tensors(dt, cols):
    import torch
    dtype = torch.float32 if dt == "f32" else torch.bfloat16
    es = 4 if dt == "f32" else 2
    rows = max(1, (TARGET // 2 + cols * es - 1) // (cols * es))
    x = (torch.rand(rows, cols, device="cuda", dtype=torch.float32) * 8 - 4).to(dtype)
    w = torch.rand(cols, device="cuda", dtype=dtype)
    b = torch.rand(cols, device="cuda", dtype=dtype)
    return x, w, b, rows, rows * cols * es


def write_table(rows_out, onorm_csv, dev, md):
    """Side-by-side markdown table: onorm (CSV from onorm_bench_cuda) vs torch rows."""
    ours = {}
    with open(onorm_csv) as f:
        for r in csv.DictReader(f):
            ours[(r["op"], r["dtype"], int(r["cols"]))] = r
    lines = [f"Device: {dev}. TB/s = bytes moved / time (every row tensor read or written once); % copy against a device-to-device copy "
             "of the same bytes in the same process (onorm: cudaMemcpyAsync; torch: Tensor.copy_).", "",
             "| op | dtype | cols | rows | onorm TB/s | onorm % copy | eager TB/s | compile TB/s | x eager | x compile |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    theirs = {(r["op"], r["dtype"], int(r["cols"])): r for r in rows_out}
    measured = {r["op"] for r in rows_out}
    for key, o in ours.items():  # every onorm case of the ops torch ran; n/a where a shape did not run
        if key[0] not in measured:
            continue
        r = theirs.get(key)
        ot = float(o["tbps"])
        et = float(r["eager_tbps"]) if r and r.get("eager_tbps") not in (None, "") else None
        ct = float(r["compile_tbps"]) if r and r.get("compile_tbps") not in (None, "") else None
        f2 = lambda v: "n/a" if v is None else f"{v:.2f}"
        ratio = lambda v: "-" if v is None else f"{ot / v:.2f}"
        lines.append(f"| {o['op']} | {o['dtype']} | {o['cols']} | {o['rows']} | {ot:.2f} | {float(o['pct_copy']):.0f}% "
                     f"| {f2(et)} | {f2(ct)} | {ratio(et)} | {ratio(ct)} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if md:
        with open(md, "w") as f:
            f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--csv")
    ap.add_argument("--onorm-csv")
    ap.add_argument("--md")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--widths", help="comma-separated column counts (default: %s)" % ",".join(map(str, WIDTHS)))
    ap.add_argument("--ops", help="comma-separated ops (default: %s; also %s)" % (",".join(OPS), ",".join(OPTION_OPS)))
    ap.add_argument("--merge", metavar="TORCH_CSV", help="only print the table from a saved torch CSV")
    args = ap.parse_args()
    if args.merge:
        with open(args.merge) as f:
            rows_out = list(csv.DictReader(f))
        dev = rows_out[0]["device"] if rows_out else "?"
        write_table(rows_out, args.onorm_csv, dev, args.md)
        return

    import torch
    import triton.testing
    torch.backends.cuda.matmul.allow_tf32 = False
    allow_recompiles()
    dev = torch.cuda.get_device_name(0)
    ops = args.ops.split(",") if args.ops else OPS
    widths = [int(w) for w in args.widths.split(",")] if args.widths else WIDTHS
    compiled = {}

    def get_compiled(op, dt, cols):
        key = (op, dt, cols)
        if key not in compiled:
            compiled[key] = torch.compile(make_fn(op, cols), dynamic=False)
        return compiled[key]

    rows_out = []
    t_start = time.time()
    keys = ["device", "op", "dtype", "cols", "rows", "copy_tbps", "eager_ms", "eager_tbps", "compile_ms", "compile_tbps"]
    # Rows are written as they are measured: a run stopped by a time limit keeps what it did.
    out_f = open(args.csv, "w", newline="") if args.csv and not args.warm else None
    wr = csv.DictWriter(out_f, fieldnames=keys, extrasaction="ignore") if out_f else None
    if wr:
        wr.writeheader()
    for dt in ("f32", "bf16"):
        for cols in widths:
            x, w, b, rows, nbytes = tensors(dt, cols)
            r = torch.rand_like(x) if any(op in OPTION_OPS for op in ops) else None
            y = torch.empty_like(x)
            if not args.warm:
                copy_ms = triton.testing.do_bench(lambda: y.copy_(x), warmup=25, rep=100, return_mode="median")
                copy_tbps = 2 * nbytes / (copy_ms * 1e-3) / 1e12
            for op in ops:
                eager = make_fn(op, cols)
                fns = {"eager": eager}
                if not args.no_compile:
                    fns["compile"] = get_compiled(op, dt, cols)
                    fns["compile"](x, r, w, b)  # compile (or load from cache)
                if args.warm:
                    continue
                rec = {"device": dev, "op": op, "dtype": dt, "cols": cols, "rows": rows, "copy_tbps": copy_tbps}
                for name, fn in fns.items():
                    ms = triton.testing.do_bench(lambda: fn(x, r, w, b), warmup=25, rep=100, return_mode="median")
                    rec[name + "_ms"] = ms
                    rec[name + "_tbps"] = moved_bytes(op, nbytes, x.numel()) / (ms * 1e-3) / 1e12
                rows_out.append(rec)
                if wr:
                    wr.writerow(rec)
                    out_f.flush()
                print(f"{op:12s} {dt:5s} {cols:8d} copy {copy_tbps:.3f} eager {rec['eager_tbps']:.3f}"
                      + (f" compile {rec['compile_tbps']:.3f}" if "compile_tbps" in rec else ""), flush=True)
            del x, r, y, w, b
            torch.cuda.empty_cache()
    print(f"torch_gpu: {time.time() - t_start:.0f} s", file=sys.stderr)
    if args.warm:
        return
    if out_f:
        out_f.close()
    if args.onorm_csv and os.path.exists(args.onorm_csv):
        write_table(rows_out, args.onorm_csv, dev, args.md)

if __name__ == "__main__":
    main()
