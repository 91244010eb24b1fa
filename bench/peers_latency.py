#!/usr/bin/env python3
"""Where a short call's microseconds go, for onlinenorm and each peer (the latency shapes of
peers_gpu.py --shapes): the do_bench time peers_gpu.py reports (events around each call, L2
flushed before it), the host's time to issue one call (calls back to back, the stream drained at
the end), the device's time for one call replayed from a CUDA graph (no host in the way), and the
kernels one call launches with their device time (torch.profiler).

  python3 bench/peers_latency.py --csv L.csv [--ops softmax,...] [--dtypes f32,bf16]
         [--shapes 64x7168,256x4096,4096x4096] [--peers onlinenorm,quack,...]
"""
import argparse
import csv
import time

import torch_gpu  # bench/, beside this script
from peers_gpu import PEERS, Case, import_peers


def host_us(fn, calls=200):
    """Host microseconds to issue one call: `calls` back to back, then the stream drained."""
    import torch
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    issued = time.perf_counter() - t
    torch.cuda.synchronize()
    return issued / calls * 1e6


def graph_us(fn, calls=20, replays=20):
    """Device microseconds of one call replayed from a CUDA graph of `calls` calls (None where the
    call cannot be captured)."""
    import torch
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            for _ in range(calls):
                fn()
    except Exception:  # noqa: BLE001  (a call that cannot be captured: reported as such)
        return None
    g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(replays):
        g.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / (calls * replays)


def kernels_of(fn, calls=20):
    """The kernels (and copies, sets) one call launches: names and device microseconds a call."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    out = []
    for ev in prof.key_averages():
        dev = getattr(ev, "self_device_time_total", None) or getattr(ev, "self_cuda_time_total", 0)
        if dev > 0:
            out.append((ev.key[:70], ev.count / calls, dev / calls))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv")
    ap.add_argument("--ops", default="softmax,log_softmax,layer_norm,rms_norm")
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--shapes", default="64x7168,256x4096,4096x4096")
    ap.add_argument("--peers", default=",".join(PEERS))
    args = ap.parse_args()
    import torch
    import triton.testing
    torch_gpu.allow_recompiles()
    peers = import_peers()
    print(torch.cuda.get_device_name(0), flush=True)
    keys = ["op", "dtype", "rows", "cols", "peer", "do_bench_us", "host_us", "graph_us", "kernels", "kernel_us"]
    out_f = open(args.csv, "w", newline="") if args.csv else None
    wr = csv.DictWriter(out_f, fieldnames=keys) if out_f else None
    if wr:
        wr.writeheader()
    for op in args.ops.split(","):
        for dt in args.dtypes.split(","):
            for shape in args.shapes.split(","):
                rows, cols = (int(v) for v in shape.split("x"))
                case = Case(op, dt, cols, peers, rows)
                for p in args.peers.split(","):
                    fn = case.fns.get(p)
                    if fn is None:
                        continue
                    try:
                        fn()
                        bench = triton.testing.do_bench(fn, warmup=5, rep=40, return_mode="median") * 1e3
                        host, graph, kern = host_us(fn), graph_us(fn), kernels_of(fn)
                    except Exception as e:  # noqa: BLE001
                        print(f"{op} {dt} {shape} {p}: failed ({type(e).__name__}: {str(e)[:80]})", flush=True)
                        continue
                    names = "; ".join(f"{n} x{c:g} {u:.2f}us" for n, c, u in kern)
                    rec = {"op": op, "dtype": dt, "rows": rows, "cols": cols, "peer": p, "do_bench_us": f"{bench:.2f}",
                           "host_us": f"{host:.2f}", "graph_us": "-" if graph is None else f"{graph:.2f}",
                           "kernels": names, "kernel_us": f"{sum(u for _, _, u in kern):.2f}"}
                    if wr:
                        wr.writerow(rec)
                        out_f.flush()
                    print(f"{op} {dt} {shape} {p}: do_bench {rec['do_bench_us']} host {rec['host_us']} "
                          f"graph {rec['graph_us']} kernels {rec['kernel_us']} [{names}]", flush=True)
                del case
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
