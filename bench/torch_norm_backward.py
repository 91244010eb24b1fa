#!/usr/bin/env python3
"""The norms' backward in PyTorch eager and torch.compile, on the shapes of bench/cuda
(onorm_bench_cuda's layer_norm_backward / rms_norm_backward rows).

  python3 bench/torch_norm_backward.py --csv T.csv [--onorm-csv O.csv --md TABLE.md]

Each case times torch.autograd.grad of F.layer_norm / F.rms_norm (dx, dgamma and dbeta) from an
output made by the eager or the compiled forward, so that only the backward graph runs
(Inductor's for torch.compile). TB/s counts x and dy read and dx written once, like the C++
benchmark; the copy is Tensor.copy_ of x's bytes in the same process.
"""
import argparse
import csv
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_gpu  # noqa: E402  (WIDTHS, tensors, write_table)

OPS = ["layer_norm_backward", "rms_norm_backward"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv")
    ap.add_argument("--onorm-csv")
    ap.add_argument("--md")
    ap.add_argument("--widths", default=",".join(str(w) for w in torch_gpu.WIDTHS))
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    import triton.testing
    torch_gpu.allow_recompiles()
    dev = torch.cuda.get_device_name(0)
    keys = ["device", "op", "dtype", "cols", "rows", "copy_tbps", "eager_ms", "eager_tbps", "compile_ms", "compile_tbps"]
    out_f = open(args.csv, "w", newline="") if args.csv else None
    wr = csv.DictWriter(out_f, fieldnames=keys, extrasaction="ignore") if out_f else None
    if wr:
        wr.writeheader()
    rows_out = []
    t0 = time.time()
    for dt in ("f32", "bf16"):
        for cols in (int(w) for w in args.widths.split(",")):
            x, w, b, rows, nbytes = torch_gpu.tensors(dt, cols)
            y = torch.empty_like(x)
            copy_ms = triton.testing.do_bench(lambda: y.copy_(x), warmup=25, rep=100, return_mode="median")
            copy_tbps = 2 * nbytes / (copy_ms * 1e-3) / 1e12
            dy = torch.randn_like(x)
            for op in OPS:
                layer = op == "layer_norm_backward"
                xs = x.detach().requires_grad_(True)
                ws = w.detach().requires_grad_(True)
                bs = b.detach().requires_grad_(True)
                fwd = (lambda a, g, c: F.layer_norm(a, (cols,), g, c, 1e-5)) if layer else \
                    (lambda a, g, c: F.rms_norm(a, (cols,), g, 1e-5))
                inputs = (xs, ws, bs) if layer else (xs, ws)
                rec = {"device": dev, "op": op, "dtype": dt, "cols": cols, "rows": rows, "copy_tbps": copy_tbps}
                for name, fn in (("eager", fwd), ("compile", torch.compile(fwd, dynamic=False))):
                    out = fn(xs, ws, bs)
                    grad = lambda: torch.autograd.grad(out, inputs, dy, retain_graph=True)
                    grad()
                    ms = triton.testing.do_bench(grad, warmup=10, rep=60, return_mode="median")
                    rec[name + "_ms"] = ms
                    rec[name + "_tbps"] = 3 * nbytes / (ms * 1e-3) / 1e12
                    del out
                rows_out.append(rec)
                if wr:
                    wr.writerow(rec)
                    out_f.flush()
                print(f"{op} {dt} {cols} eager {rec['eager_tbps']:.2f} compile {rec['compile_tbps']:.2f} "
                      f"copy {copy_tbps:.2f} TB/s ({time.time() - t0:.0f} s)", flush=True)
            del x, y, dy
            torch.cuda.empty_cache()
    if args.onorm_csv:
        ours = [r for r in csv.DictReader(open(args.onorm_csv)) if r["op"] in OPS]
        filtered = args.onorm_csv + ".backward.csv"
        with open(filtered, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(ours[0].keys()))
            w.writeheader()
            w.writerows(ours)
        torch_gpu.write_table(rows_out, filtered, dev, args.md)


if __name__ == "__main__":
    main()
