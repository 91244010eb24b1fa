#!/usr/bin/env python3
"""onlinenorm beside its peers on one GPU, in one process: the version-1 ops (softmax,
log-softmax, LayerNorm, RMSNorm), the version-2 norms (the residual add, the FP8 output, the
backward passes) and softmax's backward, each against PyTorch eager,
torch.compile, Liger-Kernel and quack where they have the op, and against a copy of the same
bytes (the faster of Tensor.copy_ and a Triton copy of 16 bytes per lane).

  python3 bench/peers_gpu.py --csv P.csv [--md P.md] [--ops a,b] [--widths 64,...] [--seconds S]
  python3 bench/peers_gpu.py --shapes 64x7168,256x4096,4096x4096 ...   (latency: microseconds)

onlinenorm runs through its Python package (CUDA tensors on the current stream). Every case has
256 MiB of x; TB/s counts every row tensor read or written once, gamma (beta) once, the per-row
statistics and the column sums (ISSUE 12's rule). Times: triton.testing.do_bench, median, L2
flushed between calls. A peer that fails on a case (a shape it does not take) is reported as such.
"""
import argparse
import importlib
import csv
import time
import traceback

import torch_gpu  # bench/, beside this script: allow_recompiles()

X_BYTES = 256 << 20
WIDTHS = [64, 1024, 4096, 8192, 16384, 32768, 131072, 262144]
OPS = ["softmax", "log_softmax", "layer_norm", "rms_norm", "add_rms_norm", "rms_norm_fp8", "rms_norm_gemma",
       "rms_norm_f32w", "softmax_backward", "rms_norm_backward", "layer_norm_backward"]
PEERS = ["onlinenorm", "eager", "compile", "liger", "quack"]


def import_peers():
    """The optional peers' modules, or the reason each is missing."""
    found = {}
    try:
        import liger_kernel.ops.fused_add_rms_norm as la
        import liger_kernel.ops.layer_norm as ll
        import liger_kernel.ops.rms_norm as lr
        import liger_kernel.ops.softmax as ls
        found["liger"] = (lr, la, ll, ls)
    except Exception as e:  # noqa: BLE001  (any import failure: reported, the others still run)
        found["liger"] = f"import failed: {e}"
    try:
        # quack/__init__.py binds the names rmsnorm and softmax to functions: the modules come
        # from importlib.
        found["quack"] = importlib.import_module("quack.rmsnorm")
        found["quack_softmax"] = importlib.import_module("quack.softmax")
    except Exception as e:  # noqa: BLE001
        found["quack"] = found["quack_softmax"] = f"import failed: {e}"
    return found


def moved_bytes(op, rows, cols, es):
    x = rows * cols * es
    stats = rows * 4
    if op in ("softmax", "log_softmax"):
        return 2 * x
    if op == "layer_norm":
        return 2 * x + 2 * cols * es
    if op == "softmax_backward":
        return 3 * x
    if op in ("rms_norm", "rms_norm_gemma"):
        return 2 * x + cols * es
    if op == "rms_norm_f32w":
        return 2 * x + cols * 4
    if op == "add_rms_norm":
        return 4 * x + cols * es
    if op == "rms_norm_fp8":
        return x + rows * cols + stats + cols * es
    if op == "rms_norm_backward":
        return 3 * x + stats + cols * es + cols * 4
    if op == "layer_norm_backward":
        return 3 * x + 2 * stats + cols * es + 2 * cols * 4
    raise ValueError(op)


def copy_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def copy16(src, dst, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)

    def run(src, dst):
        n = src.numel()
        copy16[(triton.cdiv(n, 4096),)](src, dst, n, BLOCK=4096)
    return run


class Case:
    """The tensors of one (op, dtype, width) and a callable per peer (None: not offered)."""

    def __init__(self, op, dt, cols, peers, rows=None):
        import torch
        import torch.nn.functional as F
        import onlinenorm
        self.op, self.dt, self.cols = op, dt, cols
        dtype = torch.float32 if dt == "f32" else torch.bfloat16
        es = 4 if dt == "f32" else 2
        rows = rows or max(1, X_BYTES // (cols * es))
        self.rows, self.bytes = rows, moved_bytes(op, rows, cols, es)
        x = torch.randn(rows, cols, device="cuda", dtype=dtype)
        w = torch.rand(cols, device="cuda", dtype=dtype) + 0.5
        eps = 1e-6
        self.fns = {}
        # Each peer's modules, or None where its import failed (a string: the reason).
        liger, quack, quack_sm = (None if isinstance(peers[k], str) else peers[k]
                                  for k in ("liger", "quack", "quack_softmax"))
        if op in ("softmax", "log_softmax"):
            y = torch.empty_like(x)
            log = op == "log_softmax"
            ours = onlinenorm.log_softmax if log else onlinenorm.softmax
            self.fns["onlinenorm"] = lambda: ours(x, out=y)
            fwd = (lambda a: torch.log_softmax(a, -1)) if log else (lambda a: torch.softmax(a, -1))
            self.fns["eager"] = lambda: fwd(x)
            c = torch.compile(fwd, dynamic=False)
            self.fns["compile"] = lambda: c(x)
            if not log and liger:
                self.fns["liger"] = lambda: liger[3].LigerSoftmaxFunction.apply(x)
            if not log and quack_sm:
                self.fns["quack"] = lambda: quack_sm.softmax_fwd(x)
        elif op == "softmax_backward":
            yv = torch.softmax(x.float(), -1).to(dtype)
            dy = torch.randn_like(x)
            dx = torch.empty_like(x)
            self.fns["onlinenorm"] = lambda: onlinenorm.softmax_backward(yv, dy, out=dx)
            bwd = lambda g, o: torch._softmax_backward_data(g, o, -1, dtype)
            self.fns["eager"] = lambda: bwd(dy, yv)
            c = torch.compile(bwd, dynamic=False)
            self.fns["compile"] = lambda: c(dy, yv)
            if quack_sm:
                self.fns["quack"] = lambda: quack_sm.softmax_bwd(dy, yv)
        elif op == "layer_norm":
            b = torch.randn(cols, device="cuda", dtype=dtype)
            y = torch.empty_like(x)
            self.fns["onlinenorm"] = lambda: onlinenorm.layer_norm(x, w, b, 1e-5, out=y)
            fwd = lambda a, g, c_: F.layer_norm(a, (cols,), g, c_, 1e-5)
            self.fns["eager"] = lambda: fwd(x, w, b)
            c = torch.compile(fwd, dynamic=False)
            self.fns["compile"] = lambda: c(x, w, b)
            if liger:
                self.fns["liger"] = lambda: liger[2].layer_norm_forward(x, w, b, 1e-5)
            if quack:
                wf, bf = w.float(), b.float()  # quack's LayerNorm takes float32 parameters only
                self.fns["quack"] = lambda: quack.layernorm_fwd(x, wf, bf, eps=1e-5)
        elif op in ("rms_norm", "rms_norm_f32w"):  # f32w: f32 gamma beside x's dtype (mixed-precision weights)
            g = w.float() if op == "rms_norm_f32w" else w
            y = torch.empty_like(x)
            self.fns["onlinenorm"] = lambda: onlinenorm.rms_norm(x, g, eps, out=y)
            if op == "rms_norm":
                fwd = lambda a, g_: F.rms_norm(a, (cols,), g_, eps)
            else:
                fwd = lambda a, g_: F.rms_norm(a.float(), (cols,), g_, eps).to(a.dtype)
            self.fns["eager"] = lambda: fwd(x, g)
            c = torch.compile(fwd, dynamic=False)
            self.fns["compile"] = lambda: c(x, g)
            if liger:
                lr = liger[0]
                self.fns["liger"] = lambda: lr.LigerRMSNormFunction.apply(x, g, eps, 0.0, "llama", False)
            if quack:
                qr = quack
                self.fns["quack"] = lambda: qr.rmsnorm_fwd(x, g, eps=eps)
        elif op == "rms_norm_gemma":  # Gemma's scale 1 + gamma, gamma of x's dtype
            y = torch.empty_like(x)
            self.fns["onlinenorm"] = lambda: onlinenorm.norm(x, "rms_norm", w, eps=eps, weight_offset=1.0, out=y)
            fwd = lambda a, g: (F.rms_norm(a.float(), (cols,), None, eps) * (1.0 + g.float())).to(a.dtype)
            self.fns["eager"] = lambda: fwd(x, w)
            c = torch.compile(fwd, dynamic=False)
            self.fns["compile"] = lambda: c(x, w)
            if liger:
                lr = liger[0]
                self.fns["liger"] = lambda: lr.LigerRMSNormFunction.apply(x, w, eps, 1.0, "gemma", False)
        elif op == "add_rms_norm":
            r = torch.randn_like(x)
            y, h = torch.empty_like(x), torch.empty_like(x)
            self.fns["onlinenorm"] = lambda: onlinenorm.norm(x, "rms_norm", w, eps=eps, residual=r, residual_out=h,
                                                            out=y)

            def fwd(a, res, g):
                s = a + res
                return F.rms_norm(s, (cols,), g, eps), s
            self.fns["eager"] = lambda: fwd(x, r, w)
            c = torch.compile(fwd, dynamic=False)
            self.fns["compile"] = lambda: c(x, r, w)
            if liger:
                la = liger[1]
                self.fns["liger"] = lambda: la.LigerFusedAddRMSNormFunction.apply(x, r, w, eps, 0.0, "llama", False)
            if quack:
                qr = quack
                self.fns["quack"] = lambda: qr.rmsnorm_fwd(x, w, residual=r, eps=eps)
        elif op == "rms_norm_fp8":
            y = torch.empty(rows, cols, device="cuda", dtype=torch.float8_e4m3fn)
            scale = torch.empty(rows, device="cuda", dtype=torch.float32)
            self.fns["onlinenorm"] = lambda: onlinenorm.norm(x, "rms_norm", w, eps=eps, out=y, y_scale=scale)

            def fwd(a, g):
                v = F.rms_norm(a, (cols,), g, eps).float()
                s = v.abs().amax(dim=-1, keepdim=True) / 448.0
                return (v / s).to(torch.float8_e4m3fn), s
            self.fns["eager"] = lambda: fwd(x, w)
            c = torch.compile(fwd, dynamic=False)
            self.fns["compile"] = lambda: c(x, w)
        else:  # the backward passes: dx, dgamma (and dbeta) from the forward's statistics
            layer = op == "layer_norm_backward"
            b = torch.rand(cols, device="cuda", dtype=dtype)
            dy = torch.randn_like(x)
            dx = torch.empty_like(x)
            if layer:
                _, mean, rstd = onlinenorm.layer_norm(x, w, b, 1e-5, return_stats=True)
                self.fns["onlinenorm"] = lambda: onlinenorm.layer_norm_backward(x, dy, mean, rstd, w, out=dx)
            else:
                _, rstd = onlinenorm.rms_norm(x, w, eps, return_stats=True)
                self.fns["onlinenorm"] = lambda: onlinenorm.rms_norm_backward(x, dy, rstd, w, out=dx)
            xs, ws, bs = (t.detach().requires_grad_(True) for t in (x, w, b))
            fwd = (lambda a, g, c: F.layer_norm(a, (cols,), g, c, 1e-5)) if layer else \
                (lambda a, g, c: F.rms_norm(a, (cols,), g, eps))
            inputs = (xs, ws, bs) if layer else (xs, ws)
            for name, fn in (("eager", fwd), ("compile", torch.compile(fwd, dynamic=False))):
                out = fn(xs, ws, bs)  # the graph stays alive for retain_graph
                self.fns[name] = lambda out=out: torch.autograd.grad(out, inputs, dy, retain_graph=True)
            if liger:
                lr, _, ll, _ = liger

                def liger_bwd():
                    if layer:
                        _, _, lmean, lrstd, _, _ = ll.layer_norm_forward(x, w, b, 1e-5)
                        return lambda: ll.layer_norm_backward(dy, x, w, b, lmean, lrstd)
                    yl = lr.LigerRMSNormFunction.apply(xs, ws, eps, 0.0, "llama", False)
                    return lambda: torch.autograd.grad(yl, (xs, ws), dy, retain_graph=True)
                self.set_up("liger", liger_bwd)
            if quack and not layer:
                qr = quack

                def quack_bwd():
                    _, _, qrstd = qr.rmsnorm_fwd(x, w, eps=eps, store_rstd=True)
                    return lambda: qr.rmsnorm_bwd(x, w, dy, qrstd)
                self.set_up("quack", quack_bwd)
        self.x = x

    def set_up(self, peer, make):
        """A peer whose own forward (for its statistics) fails on this case: the failure, reported."""
        try:
            self.fns[peer] = make()
        except Exception as e:  # noqa: BLE001
            reason = f"{type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"

            def failed():
                raise RuntimeError(reason)
            self.fns[peer] = failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv")
    ap.add_argument("--md")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--widths", default=",".join(str(w) for w in WIDTHS))
    ap.add_argument("--shapes", help="ROWSxCOLS,... instead of --widths (rows that may leave the GPU underfilled: "
                                     "the table gives microseconds)")
    ap.add_argument("--seconds", type=float, default=1e9, help="stop starting new cases after this long")
    args = ap.parse_args()
    import torch
    import triton.testing
    torch_gpu.allow_recompiles()
    import onlinenorm
    peers = import_peers()
    for name in ("liger", "quack"):
        if isinstance(peers[name], str):
            print(f"{name}: {peers[name]}", flush=True)
    dev = torch.cuda.get_device_name(0)
    print(f"{dev}; torch {torch.__version__}; onlinenorm {onlinenorm.Context('cuda').name}", flush=True)
    copy = copy_kernel()
    ceilings = {}

    def ceiling(nbytes):
        """TB/s of the faster copy moving nbytes (half read, half written)."""
        if nbytes not in ceilings:
            # Whole 16-byte vectors: the copy kernel moves int4s (a row width off a multiple of
            # 8 bytes leaves a case's bytes odd); the few bytes dropped do not move the ratio.
            src = torch.empty(nbytes // 2 // 16 * 16, device="cuda", dtype=torch.uint8).view(torch.int32)
            dst = torch.empty_like(src)
            best = min(triton.testing.do_bench(f, warmup=10, rep=50, return_mode="median")
                       for f in (lambda: dst.copy_(src), lambda: copy(src, dst)))
            ceilings[nbytes] = src.numel() * 8 / (best * 1e-3) / 1e12
            del src, dst
        return ceilings[nbytes]

    keys = ["device", "op", "dtype", "cols", "rows", "bytes", "copy_tbps"]
    for p in PEERS:
        keys += [p + "_ms", p + "_tbps"]
    out_f = open(args.csv, "w", newline="") if args.csv else None
    wr = csv.DictWriter(out_f, fieldnames=keys, extrasaction="ignore") if out_f else None
    if wr:
        wr.writeheader()
    results = []
    t0 = time.time()
    for op in args.ops.split(","):
        for dt in args.dtypes.split(","):
            shapes = [tuple(int(v) for v in t.split("x")) for t in args.shapes.split(",")] if args.shapes else \
                [(None, int(w)) for w in args.widths.split(",")]
            for rows, cols in shapes:
                if time.time() - t0 > args.seconds:
                    print(f"stopped at {op} {dt} {cols}: --seconds {args.seconds}", flush=True)
                    break
                try:
                    case = Case(op, dt, cols, peers, rows)
                except Exception:  # noqa: BLE001
                    print(f"{op} {dt} {cols}: setup failed\n{traceback.format_exc(limit=3)}", flush=True)
                    torch.cuda.empty_cache()
                    continue
                rec = {"device": dev, "op": op, "dtype": dt, "cols": cols, "rows": case.rows, "bytes": case.bytes,
                       "copy_tbps": ceiling(case.bytes)}
                line = []
                for p in PEERS:
                    fn = case.fns.get(p)
                    if fn is None:
                        continue
                    try:
                        fn()
                        ms = triton.testing.do_bench(fn, warmup=5, rep=40, return_mode="median")
                        rec[p + "_ms"], rec[p + "_tbps"] = ms, case.bytes / (ms * 1e-3) / 1e12
                        line.append(f"{p} {rec[p + '_tbps'] / rec['copy_tbps'] * 100:.0f}%")
                    except Exception as e:  # noqa: BLE001
                        line.append(f"{p} failed ({type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''})")
                results.append(rec)
                if wr:
                    wr.writerow(rec)
                    out_f.flush()
                print(f"{op} {dt} {cols}: copy {rec['copy_tbps']:.2f} TB/s; " + ", ".join(line) +
                      f" ({time.time() - t0:.0f} s)", flush=True)
                del case
                torch.cuda.empty_cache()
    if args.md:
        write_md(results, args.md, dev, latency=bool(args.shapes))


def write_md(results, path, dev, latency=False):
    """% of the copy per peer (latency: microseconds per call); the best peer and onlinenorm's
    speed relative to it (> 1: ahead)."""
    with open(path, "w") as f:
        unit = "microseconds per call" if latency else "% of a copy of the same bytes (the faster of copy_ and a Triton copy)"
        f.write(f"{dev}: {unit}\n\n")
        f.write("| op | dtype | rows x cols | copy TB/s | " + " | ".join(PEERS) + " | best peer | ours / best |\n")
        f.write("|---|---|---|---|" + "---|" * len(PEERS) + "---|---|\n")
        for r in results:
            cells = []
            for p in PEERS:
                v = r.get(p + "_tbps")
                cells.append("-" if v is None else f"{r[p + '_ms'] * 1e3:.1f}" if latency else
                             f"{v / r['copy_tbps'] * 100:.0f}")
            others = [(r[p + "_tbps"], p) for p in PEERS[1:] if r.get(p + "_tbps")]
            best = max(others) if others else None
            ours = r.get("onlinenorm_tbps")
            ratio = f"{ours / best[0]:.2f}" if best and ours else "-"
            f.write(f"| {r['op']} | {r['dtype']} | {r['rows']} x {r['cols']} | {r['copy_tbps']:.2f} | " +
                    " | ".join(cells) + f" | {best[1] if best else '-'} | {ratio} |\n")


if __name__ == "__main__":
    main()
