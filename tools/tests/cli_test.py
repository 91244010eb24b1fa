#!/usr/bin/env python3
"""End-to-end tests of the onorm command line on the CPU backend.

usage: cli_test.py ONORM_EXECUTABLE TEST_NAME [WORK_DIR]
Test names: compare_table, bound_violation, json_schema, npy_input, usage_errors, bench,
bench_memory, bench_interrupt, bench_setup_interrupt, bench_png, run, info, backward, norm_ops_compare,
norm_ops_run, norm_ops_usage, norm_ops_bench, row_ops_compare, row_ops_usage. Uses only the Python standard library.
"""
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

ONORM = None
WORK = None
# An ASan/UBSan build: no address-space caps (the sanitizer reserves terabytes) and no memory figures.
SANITIZED = os.environ.get("ONORM_TEST_SANITIZED") == "1"


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def limit_memory(gib):
    """A preexec_fn capping the child's address space: a tool that tries to buffer gigabytes
    fails fast instead of growing the test machine into swap."""
    def apply():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (gib << 30, gib << 30))
    return apply


def onorm(*args, env=None, expect=None, mem_gib=None):
    e = dict(os.environ)
    e.pop("ONLINENORM_BACKEND", None)
    if env:
        e.update(env)
    p = subprocess.run([ONORM] + [str(a) for a in args], capture_output=True, text=True, env=e, timeout=300,
                       preexec_fn=limit_memory(mem_gib) if mem_gib and not SANITIZED else None)
    if expect is not None and p.returncode != expect:
        raise Failure("onorm %s: exit %d, expected %d\nstdout:\n%s\nstderr:\n%s"
                      % (" ".join(map(str, args)), p.returncode, expect, p.stdout, p.stderr))
    return p


def parse_table(stdout):
    """The compare table: a header line, a dashed rule, one line per backend.
    Columns are separated by two or more spaces (cells never contain two spaces)."""
    lines = stdout.splitlines()
    rule = next(i for i, l in enumerate(lines) if l and set(l) == {"-"})
    import re
    split = lambda l: re.split(r"  +", l.strip())
    head = split(lines[rule - 1])
    rows = []
    for l in lines[rule + 1:]:
        if not l.strip() or ":" in l.split("  ")[0]:
            break
        cells = split(l)
        check(len(cells) == len(head), "table row %r has %d cells, header %d" % (l, len(cells), len(head)))
        rows.append(dict(zip(head, cells)))
    return head, rows


def npy_bytes(descr, shape, payload, fortran=False, major=1):
    shape_txt = "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, "True" if fortran else "False", shape_txt)
    pre = 10 if major == 1 else 12
    total = pre + len(d) + 1
    d += " " * ((total + 63) // 64 * 64 - total) + "\n"
    head = b"\x93NUMPY" + bytes([major, 0])
    head += struct.pack("<H", len(d)) if major == 1 else struct.pack("<I", len(d))
    return head + d.encode() + payload


def write(name, data):
    path = os.path.join(WORK, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


# ----------------------------------------------------------------------------- tests

def test_compare_table():
    for op in ["softmax", "log_softmax", "layer_norm", "rms_norm"]:
        for dt in ["f32", "bf16"]:
            p = onorm("compare", "--op", op, "--rows", 37, "--cols", 300, "--dtype", dt,
                      "--backends", "cpu,cpu", "--iters", 2, expect=0)
            head, rows = parse_table(p.stdout)
            check(head[:8] == ["backend", "device", "time_ms", "GB/s", "max_abs", "max_rel", "max_ulp", "bound"],
                  "header: %r" % head)
            check(head[8:] == ["!=cpu", "!=cpu#2"], "pair columns: %r" % head)
            check([r["backend"] for r in rows] == ["cpu", "cpu#2"], "rows: %r" % rows)
            for r in rows:
                check(r["device"].startswith("cpu"), "device %r" % r["device"])
                check(float(r["time_ms"]) > 0 and float(r["GB/s"]) > 0, "timing %r" % r)
                check(r["bound"] == "ok", "bound %r" % r)
                # within the bound, yet not the float64 answer bit for bit (rounding shows)
                check(0 < float(r["max_ulp"]) < 1e5, "max_ulp %r" % r)
                check(float(r["max_abs"]) >= 0 and float(r["max_rel"]) >= 0, "errors %r" % r)
            check(rows[0]["!=cpu#2"] == "0" and rows[1]["!=cpu"] == "0", "cpu is not deterministic? %r" % rows)
            check(rows[0]["!=cpu"] == "-", "diagonal %r" % rows)
            check("%s 37x300 %s -> %s" % (op, dt, dt) in p.stdout.splitlines()[0], p.stdout.splitlines()[0])
    # out-dtype differs from the input dtype
    p = onorm("compare", "--op", "softmax", "--rows", 8, "--cols", 64, "--dtype", "bf16", "--out-dtype", "f32",
              "--backends", "cpu", "--iters", 1, expect=0)
    check("bf16 -> f32" in p.stdout, p.stdout)
    # the presets run and produce a table (special values are judged by the reference rules)
    for dist in ["uniform", "large-offset", "special"]:
        p = onorm("compare", "--op", "softmax", "--rows", 16, "--cols", 100, "--dist", dist, "--backends", "cpu",
                  "--iters", 1)
        check(p.returncode in (0, 3), "dist %s exit %d: %s" % (dist, p.returncode, p.stderr))
        _, rows = parse_table(p.stdout)
        check(len(rows) == 1, "dist %s: %r" % (dist, rows))


def test_bound_violation():
    base = ["compare", "--op", "softmax", "--rows", 16, "--cols", 256, "--backends", "cpu,cpu", "--iters", 1]
    # one ulp: bitwise different, still within the bound
    p = onorm(*base, "--perturb-ulps", "1@cpu#2", expect=0)
    _, rows = parse_table(p.stdout)
    check(rows[0]["!=cpu#2"] == "1" and rows[1]["!=cpu"] == "1", "1-ulp perturbation not counted: %r" % rows)
    check(rows[1]["bound"] == "ok", rows)
    # far outside the bound: exit 3, FAIL in the table, a message naming the element
    p = onorm(*base, "--perturb-ulps", "100000@cpu#2", "--json", os.path.join(WORK, "viol.json"), expect=3)
    _, rows = parse_table(p.stdout)
    check(rows[0]["bound"] == "ok" and rows[1]["bound"] == "FAIL(1)", rows)
    check(float(rows[1]["max_ulp"]) >= 100000 * 0.99, rows)
    check("cpu#2: bound VIOLATED" in p.stdout, p.stdout)
    j = json.load(open(os.path.join(WORK, "viol.json")))
    check(j["bound_ok"] is False and j["backends"][1]["bound_ok"] is False and j["backends"][0]["bound_ok"], j)
    check(j["backends"][1]["violations"] == 1 and j["backends"][1]["first_violation"]["what"] == "y", j)
    check(j["pairs"] == [{"a": "cpu", "b": "cpu#2", "differing_elements": 1}], j["pairs"])
    # the default target is the first backend; other dtypes and ops
    for op, dt in [("layer_norm", "bf16"), ("rms_norm", "f16"), ("log_softmax", "f32")]:
        p = onorm("compare", "--op", op, "--rows", 8, "--cols", 128, "--dtype", dt, "--backends", "cpu",
                  "--iters", 1, "--perturb-ulps", 5000, expect=3)
        check("FAIL(1)" in p.stdout, p.stdout)
    # run too
    onorm("run", "--op", "softmax", "--rows", 8, "--cols", 128, "--backend", "cpu", "--iters", 1,
          "--perturb-ulps", 100000, expect=3)
    p = onorm("compare", "--op", "softmax", "--rows", 8, "--cols", 128, "--backends", "cpu", "--iters", 1,
              "--perturb-ulps", "5@cuda:7", expect=2)
    # the reference rounded to the output dtype is never a violation: log-softmax of a row with a
    # spread of ~1.4e38 overflows to -inf in f16 and bf16, which is the correctly rounded answer
    for out_dt in ["f16", "bf16", "f32"]:
        p = onorm("compare", "--op", "log_softmax", "--out-dtype", out_dt, "--dist", "special", "--rows", 16,
                  "--cols", 64, "--backends", "cpu", "--iters", 1)
        check(p.returncode == 0 and "FAIL" not in p.stdout, "log_softmax -> %s special: exit %d\n%s%s"
              % (out_dt, p.returncode, p.stdout, p.stderr))


def validate_compare_json(j, nbackends):
    def typed(obj, key, types):
        check(key in obj, "missing key %r in %r" % (key, list(obj)))
        v = obj[key]
        ok = isinstance(v, bool) if types is bool else (isinstance(v, types) and not isinstance(v, bool))
        check(ok, "key %r has %r" % (key, v))
    num = (int, float)
    check(j["schema"] == "onorm-compare/1", j.get("schema"))
    for k, t in [("version", str), ("op", str), ("rows", int), ("cols", int), ("dtype", str), ("out_dtype", str),
                 ("eps", num), ("input", dict), ("backends", list), ("pairs", list), ("bound_ok", bool)]:
        typed(j, k, t)
    check(j["input"]["source"] in ("generated", "file"), j["input"])
    check(len(j["backends"]) == nbackends, j["backends"])
    labels = [b["label"] for b in j["backends"]]
    for b in j["backends"]:
        check("error" in b and (b["error"] is None or isinstance(b["error"], str)), b)
        ran = b["error"] is None
        for k, t in [("label", str), ("backend", str), ("device_index", int), ("device", str), ("samples", int),
                     ("calls_per_sample", int), ("bytes_moved", int), ("checked", int), ("violations", int),
                     ("bound_ok", bool), ("bitwise_diff", dict)]:
            typed(b, k, t)
        for k in ["time_ms", "gbps", "max_abs_err", "max_rel_err", "max_ulp_err"]:
            if ran:
                typed(b, k, num)
            else:
                check(b[k] is None, (k, b))
        check(b["backend"] in ("cpu", "cuda", "hip"), b)
        check(set(b["bitwise_diff"]) == set(labels) - {b["label"]}, b["bitwise_diff"])
        check((b["first_violation"] is None) == (b["bound_ok"] or not ran), b)
        if ran:
            check(b["checked"] >= j["rows"] * j.get("k", j["cols"]), b)  # softmax_topk: k values a row
            check(all(isinstance(v, int) or v is None for v in b["bitwise_diff"].values()), b)
    typed(j, "errors", bool)
    check(j["errors"] == any(b["error"] is not None for b in j["backends"]), j)
    check(len(j["pairs"]) == nbackends * (nbackends - 1) // 2, j["pairs"])
    check(j["bound_ok"] == all(b["bound_ok"] for b in j["backends"]), j)
    for pr in j["pairs"]:
        check(set(pr) == {"a", "b", "differing_elements"} and pr["a"] in labels and pr["b"] in labels, pr)


def test_json_schema():
    out = os.path.join(WORK, "cmp.json")
    p = onorm("compare", "--op", "layer_norm", "--rows", 20, "--cols", 500, "--dtype", "f16", "--backends",
              "cpu,cpu,cpu", "--iters", 1, "--json", out, expect=0)
    raw = open(out).read()
    j = json.loads(raw)
    # strict JSON: no NaN/Infinity tokens
    json.loads(raw, parse_constant=lambda c: (_ for _ in ()).throw(Failure("non-standard constant " + c)))
    r = subprocess.run([sys.executable, "-m", "json.tool", out], capture_output=True)
    check(r.returncode == 0, r.stderr)
    validate_compare_json(j, 3)
    check(j["op"] == "layer_norm" and j["rows"] == 20 and j["cols"] == 500 and j["dtype"] == "f16", j)
    check(j["input"] == {"source": "generated", "dist": "normal", "seed": 1}, j["input"])
    # the table and the JSON say the same
    _, rows = parse_table(p.stdout)
    for row, b in zip(rows, j["backends"]):
        check(row["backend"] == b["label"], (row, b))
        check(abs(float(row["max_ulp"]) - b["max_ulp_err"]) <= 0.006, (row, b))
    # special values: errors that are not finite appear as null, the file stays strict JSON
    out2 = os.path.join(WORK, "cmp_special.json")
    p = onorm("compare", "--op", "softmax", "--rows", 16, "--cols", 64, "--dist", "special", "--backends", "cpu",
              "--iters", 1, "--json", out2)
    check(p.returncode in (0, 3), p.stderr)
    raw = open(out2).read()
    json.loads(raw, parse_constant=lambda c: (_ for _ in ()).throw(Failure("non-standard constant " + c)))
    validate_compare_json(json.loads(raw), 1)


def test_npy_input():
    import array
    rows, cols = 6, 50
    vals = array.array("f", [((i * 37) % 101) / 17.0 - 3.0 for i in range(rows * cols)])
    f32 = write("x_f32.npy", npy_bytes("<f4", (rows, cols), vals.tobytes()))
    p = onorm("compare", "--op", "softmax", "--input", f32, "--backends", "cpu", "--iters", 1,
              "--json", os.path.join(WORK, "in.json"), expect=0)
    check("softmax 6x50 f32 -> f32" in p.stdout, p.stdout)
    j = json.load(open(os.path.join(WORK, "in.json")))
    check(j["input"]["source"] == "file" and j["input"]["path"] == f32, j["input"])
    # the same values generate the same result whatever the header version
    f32v2 = write("x_f32_v2.npy", npy_bytes("<f4", (rows, cols), vals.tobytes(), major=2))
    onorm("compare", "--op", "rms_norm", "--input", f32v2, "--backends", "cpu", "--iters", 1, expect=0)
    # float16 file, float64 file rounded to f32 and bf16, bf16 bits as uint16
    f16 = write("x_f16.npy", npy_bytes("<f2", (rows, cols), struct.pack("<%de" % (rows * cols), *vals)))
    p = onorm("compare", "--op", "layer_norm", "--input", f16, "--backends", "cpu", "--iters", 1, expect=0)
    check("f16 -> f16" in p.stdout, p.stdout)
    p = onorm("compare", "--op", "layer_norm", "--input", f16, "--out-dtype", "f32", "--backends", "cpu",
              "--iters", 1, expect=0)
    check("f16 -> f32" in p.stdout, p.stdout)
    f64 = write("x_f64.npy", npy_bytes("<f8", (rows, cols), struct.pack("<%dd" % (rows * cols), *vals)))
    p = onorm("compare", "--op", "softmax", "--input", f64, "--dtype", "bf16", "--backends", "cpu", "--iters", 1,
              expect=0)
    check("bf16 -> bf16" in p.stdout, p.stdout)
    p = onorm("compare", "--op", "softmax", "--input", f64, "--backends", "cpu", "--iters", 1, expect=0)
    check("f64 -> f64" in p.stdout, p.stdout)
    bf = struct.pack("<%dH" % (rows * cols), *[struct.unpack("<I", struct.pack("<f", v))[0] >> 16 for v in vals])
    u16 = write("x_bf16.npy", npy_bytes("<u2", (rows, cols), bf))
    onorm("compare", "--op", "softmax", "--input", u16, "--dtype", "bf16", "--backends", "cpu", "--iters", 1,
          expect=0)
    # the file's values are what runs: fully masked rows give exact zeros (error 0), where
    # generated data would show rounding error
    ninf = write("x_ninf.npy", npy_bytes("<f4", (4, 16), struct.pack("<64f", *([float("-inf")] * 64))))
    p = onorm("compare", "--op", "softmax", "--input", ninf, "--backends", "cpu", "--iters", 1, expect=0)
    _, rows_ = parse_table(p.stdout)
    check(rows_[0]["max_abs"] == "0" and rows_[0]["max_ulp"] == "0.00", rows_)
    # --rows/--cols that agree are fine
    onorm("compare", "--op", "softmax", "--input", f32, "--rows", rows, "--cols", cols, "--backends", "cpu",
          "--iters", 1, expect=0)

    good = npy_bytes("<f4", (rows, cols), vals.tobytes())
    errors = {
        "uint16 without --dtype bf16": (u16, [], "bf16"),
        "f32 file read as f16": (f32, ["--dtype", "f16"], "only float64"),
        "rows mismatch": (f32, ["--rows", 7], "rows"),
        "cols mismatch": (f32, ["--cols", 49], "cols"),
        "missing file": (os.path.join(WORK, "nope.npy"), [], "cannot open"),
        "truncated": (write("trunc.npy", good[:-3]), [], "truncated"),
        "truncated header": (write("trunc_head.npy", good[:40]), [], "truncated"),
        "extra bytes": (write("extra.npy", good + b"\0\0\0\0"), [], "beyond"),
        "bad magic": (write("magic.npy", b"\x93NUMPZ" + good[6:]), [], "magic"),
        "not npy": (write("text.npy", b"hello world, not an array\n"), [], "magic"),
        "empty file": (write("empty.npy", b""), [], "preamble"),
        "3-d": (write("x3.npy", npy_bytes("<f4", (2, 3, 50), vals.tobytes())), [], "2-D"),
        "1-d": (write("x1.npy", npy_bytes("<f4", (300,), vals.tobytes())), [], "2-D"),
        "zero rows": (write("x0.npy", npy_bytes("<f4", (0, 50), b"")), [], "empty"),
        "fortran": (write("xf.npy", npy_bytes("<f4", (rows, cols), vals.tobytes(), fortran=True)), [], "Fortran"),
        "big endian": (write("xbe.npy", npy_bytes(">f4", (rows, cols), vals.tobytes())), [], "big-endian"),
        "int32": (write("xi.npy", npy_bytes("<i4", (rows, cols), vals.tobytes())), [], "not float32"),
        "complex": (write("xc.npy", npy_bytes("<c8", (rows, cols // 2), vals.tobytes())), [], "dtype"),
        "huge shape": (write("xh.npy", npy_bytes("<f4", (2 ** 40, 2 ** 40), vals.tobytes())), [], "large"),
        "shape mismatch": (write("xm.npy", npy_bytes("<f4", (rows, cols + 1), vals.tobytes())), [], "truncated"),
        "bad dict": (write("xd.npy", good.replace(b"'shape'", b"'shapf'")), [], "unexpected key"),
        "directory": (WORK, [], "is a directory"),
        "endless device": ("/dev/zero", [], "bad magic"),
    }
    for name, (path, extra, needle) in errors.items():
        p = onorm("compare", "--op", "softmax", "--input", path, *extra, "--backends", "cpu", "--iters", 1,
                  mem_gib=4)
        check(p.returncode == 1, "%s: exit %d (want 1)\n%s%s" % (name, p.returncode, p.stdout, p.stderr))
        check(needle in p.stderr and p.stderr.startswith("onorm: error:"), "%s: message %r" % (name, p.stderr))
    # --input and --dist exclude each other (usage)
    onorm("compare", "--op", "softmax", "--input", f32, "--dist", "normal", expect=2)


def expect_usage_errors(cases):
    """Each (args, needle): exit 2, the needle and the command's usage on stderr, nothing on stdout."""
    for args, needle in cases:
        p = onorm(*args)
        check(p.returncode == 2, "%r: exit %d (want 2)\n%s" % (args, p.returncode, p.stderr))
        check(needle in p.stderr, "%r: %r not in %r" % (args, needle, p.stderr))
        check("usage: onorm" in p.stderr, "%r: no usage in %r" % (args, p.stderr))
        check(p.stdout == "", "%r: stdout %r" % (args, p.stdout))


def test_usage_errors():
    cases = [
        ([], "missing command"),
        (["frobnicate"], "unknown command"),
        (["compare", "--op", "softmax", "--rows", "4", "--cols", "8", "--bogus"], "unknown option '--bogus'"),
        (["compare", "--op", "softmax", "--rows", "4", "--cols"], "needs a value"),
        (["compare", "--op", "softmax", "--rows", "4x", "--cols", "8"], "not an integer"),
        (["compare", "--op", "softmax", "--rows", "0", "--cols", "8"], "outside"),
        (["compare", "--op", "softmax", "--rows", "-4", "--cols", "8"], "outside"),
        (["compare", "--op", "softmax", "--rows", "99999999999999999999", "--cols", "8"], "not an integer"),
        (["compare", "--op", "softmax", "--rows", "4"], "missing --cols"),
        (["compare", "--rows", "4", "--cols", "8"], "missing --op"),
        (["compare", "--op", "softmaxx", "--rows", "4", "--cols", "8"], "unknown op"),
        (["compare", "--op", "softmax", "--rows", "4", "--cols", "8", "--dtype", "f8"], "unknown dtype"),
        (["compare", "--op", "softmax", "--rows", "4", "--cols", "8", "--out-dtype", "half"], "unknown dtype"),
        (["compare", "--op", "softmax", "--rows", "4", "--cols", "8", "--backends", "cpu,tpu"], "unknown backend"),
        (["compare", "--op", "softmax", "--rows", "4", "--cols", "8", "--backends", "cuda:x"], "unknown backend"),
        (["compare", "--op", "softmax", "--rows", "4", "--cols", "8", "--dist", "cauchy"], "unknown distribution"),
        (["compare", "--op", "softmax", "--rows", "4", "--cols", "8", "--eps", "nan"], "not a finite number"),
        (["compare", "--op", "softmax", "--rows", "4", "--cols", "8", "--eps", "-1"], "must be >= 0"),
        (["compare", "--op", "softmax", "--rows", "4", "--rows", "4", "--cols", "8"], "given twice"),
        (["compare", "stray"], "unexpected argument"),
        (["run", "--op", "softmax", "--rows", "4", "--cols", "8", "--iters", "0"], "outside"),
        (["run", "--op", "softmax", "--rows", "4", "--cols", "8", "--backend", "gpu"], "unknown backend"),
        (["run", "--op", "softmax", "--rows", "4", "--cols", "8", "--help=yes"], "takes no value"),
        (["bench", "--ops", "softmax,nope"], "unknown op"),
        (["bench", "--widths", "64,abc"], "not an integer"),
        (["bench", "--dtypes", "f32,f7"], "unknown dtype"),
        (["bench", "--mb", "0"], "must be in"),
        (["info", "--verbose"], "unknown option"),
    ]
    expect_usage_errors(cases)
    # the usage shown is the command's own
    p = onorm("bench", "--bogus", expect=2)
    check("usage: onorm bench" in p.stderr, p.stderr)
    # help
    p = onorm("--help", expect=0)
    check("usage: onorm <command>" in p.stdout and "compare" in p.stdout, p.stdout)
    for cmd in ["info", "run", "compare", "bench"]:
        p = onorm(cmd, "--help", expect=0)
        check(("usage: onorm " + cmd) in p.stdout, p.stdout)
    p = onorm("compare", "-h", expect=0)
    check("--backends" in p.stdout and "perturb" not in p.stdout, p.stdout)  # hidden flag stays hidden
    # a named backend that is not there: an error with the reason (not usage)
    p = onorm("compare", "--op", "softmax", "--rows", 4, "--cols", 8, "--backends", "cpu,hip:99", expect=1)
    check("hip:99 is unavailable" in p.stderr, p.stderr)
    p = onorm("run", "--op", "softmax", "--rows", 4, "--cols", 8, "--backend", "cpu:1", expect=1)
    check("cpu:1 is unavailable" in p.stderr, p.stderr)  # the device index is not dropped
    p = onorm("compare", "--op", "softmax", "--rows", 4, "--cols", 8, "--backends", "cpu:2", expect=1)
    check("cpu:2 is unavailable" in p.stderr, p.stderr)
    # the version, and the usage says how to get it
    p = onorm("--version", expect=0)
    check(p.stdout.startswith("onorm ") and len(p.stdout.split()) == 2, p.stdout)
    check("--version" in onorm("--help", expect=0).stdout, "usage lacks --version")
    # a dtype the backend does not take: the library's message
    import re
    if not re.search(r"^  cuda +available", onorm("info").stdout, re.M):
        p = onorm("compare", "--op", "softmax", "--rows", 4, "--cols", 8, "--backends", "cuda", expect=1)
        check("cuda:0 is unavailable: " in p.stderr and len(p.stderr.split("unavailable: ")[1].strip()) > 3, p.stderr)


def test_run():
    p = onorm("run", "--op", "rms_norm", "--rows", 64, "--cols", 1024, "--dtype", "bf16", "--backend", "cpu",
              "--iters", 3, "--seed", 7, expect=0)
    out = p.stdout
    check("rms_norm 64x1024 bf16 -> bf16 on cpu" in out, out)
    for key in ["time ", "bandwidth ", "max error ", "bound      holds"]:
        check(key in out, "%r missing in %s" % (key, out))
    t = float(out.split("time")[1].split("ms")[0])
    gb = float(out.split("bandwidth")[1].split("GB/s")[0])
    check(t > 0, out)
    # GB/s is the bytes of x and y over the median time
    check(abs(gb - 64 * 1024 * 4 / (t * 1e-3) / 1e9) / gb < 0.02, "bandwidth %g vs time %g" % (gb, t))


def test_info():
    p = onorm("info", expect=0)
    out = p.stdout
    check(out.startswith("onorm "), out)
    check("cpu  available, 1 device" in out, out)
    for b in ["cuda", "hip"]:
        check(("%s available" % b) in out.replace("  ", " ") or ("%s unavailable: " % b) in out.replace("  ", " "),
              out)
    check("cpu targets (best first): " in out and len(out.split("cpu targets (best first): ")[1].split()) >= 1, out)
    # ONLINENORM_BACKEND is judged, not just echoed
    p = onorm("info", env={"ONLINENORM_BACKEND": "gpu:x"}, expect=0)
    line = [l for l in p.stdout.splitlines() if l.startswith("ONLINENORM_BACKEND=")]
    check(line and "gpu:x" in line[0] and "invalid" in line[0] and "cpu, cuda[:N], hip[:N]" in line[0], p.stdout)
    p = onorm("info", env={"ONLINENORM_BACKEND": "cpu"}, expect=0)
    check("ONLINENORM_BACKEND=cpu (AUTO selects cpu" in p.stdout, p.stdout)
    p = onorm("info", env={"ONLINENORM_BACKEND": "cpu:3"}, expect=0)
    check("ONLINENORM_BACKEND=cpu:3 (backend unavailable: " in p.stdout, p.stdout)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def list_op_bytes(r):
    """bytes_moved of a one-input op of the library's list: x read and y written."""
    return r["rows"] * r["cols"] * 2 * {"f32": 4, "f64": 8}.get(r["dtype"], 2)


def validate_bench_json(j, copy_measured=True, bytes_of=list_op_bytes):
    check(j["schema"] == "onorm-bench/1", j)
    for k in ["version", "backend", "device", "bytes_per_case", "iters", "seed", "interrupted", "copy", "results",
              "skipped"]:
        check(k in j, "bench json lacks %r" % k)
    # counts are JSON integers, exact
    for k in ["bytes_per_case", "iters", "seed"]:
        check(is_int(j[k]), (k, j[k]))
    for k in ["bytes_copied", "bytes_moved"]:
        check(is_int(j["copy"][k]), (k, j["copy"]))
    if copy_measured:
        check(j["copy"]["gbps"] > 0 and j["copy"]["bytes_moved"] == 2 * j["copy"]["bytes_copied"], j["copy"])
    for r in j["results"]:
        for k in ["op", "dtype", "out_dtype", "cols", "rows", "bytes_moved", "time_ms", "samples",
                  "calls_per_sample", "gbps", "fraction_of_copy"]:
            check(k in r, "result lacks %r: %r" % (k, r))
        for k in ["cols", "rows", "bytes_moved", "samples", "calls_per_sample"]:
            check(is_int(r[k]), (k, r))
        check(r["bytes_moved"] == bytes_of(r), r)
        check(r["gbps"] > 0 and r["time_ms"] > 0, r)
        check(abs(r["bytes_moved"] / (r["time_ms"] * 1e-3) / 1e9 - r["gbps"]) <= 1e-3 * r["gbps"], r)
        check(abs(r["fraction_of_copy"] - r["gbps"] / j["copy"]["gbps"]) < 1e-6, r)


def test_bench():
    out = os.path.join(WORK, "bench.json")
    p = onorm("bench", "--backend", "cpu", "--ops", "softmax,layer_norm", "--dtypes", "f32,bf16",
              "--widths", "64,1000,4096", "--mb", 2, "--iters", 2, "--json", out, expect=0)
    j = json.load(open(out))
    validate_bench_json(j)
    check(j["backend"] == "cpu" and j["interrupted"] is False, j)
    check(len(j["results"]) == 12, len(j["results"]))
    for r in j["results"]:
        # every case moves about the same bytes: rows = bytes / (cols * 2 * size)
        size = 4 if r["dtype"] == "f32" else 2
        check(r["rows"] == max(1, int(2e6 // (r["cols"] * 2 * size))), r)
    check("[ 12/12]" in p.stdout and "left" in p.stdout, p.stdout)  # progress (not a tty: one line per case)
    check("\r" not in p.stdout, "carriage returns without a tty")
    # a byte count that is not a whole number of MB: integers stay integers
    out = os.path.join(WORK, "bench_frac.json")
    onorm("bench", "--backend", "cpu", "--ops", "rms_norm", "--dtypes", "f32", "--widths", "64", "--mb",
          "0.0123456789", "--iters", 1, "--json", out, expect=0)
    j = json.load(open(out))
    validate_bench_json(j)
    check(j["bytes_per_case"] == 12346 and j["copy"]["bytes_copied"] == 6173, j)
    # where the results go is checked before anything is measured
    for cmd in [["bench", "--backend", "cpu", "--ops", "softmax", "--dtypes", "f32", "--widths", "64", "--mb", 1],
                ["compare", "--op", "softmax", "--rows", 4, "--cols", 8, "--backends", "cpu"]]:
        for bad in [os.path.join(WORK, "no", "such", "dir.json"), WORK]:
            p = onorm(*cmd, "--json", bad, expect=1)
            check("cannot write" in p.stderr and bad in p.stderr, p.stderr)
            check("device copy" not in p.stdout and "backend" not in p.stdout, "ran before failing: " + p.stdout)
    p = onorm("bench", "--backend", "cpu", "--widths", "64", "--png", os.path.join(WORK, "nope", "x.png"), expect=1)
    check("cannot write" in p.stderr and "device copy" not in p.stdout, p.stderr + p.stdout)
    # an existing file is kept until the results replace it, and one the run created is removed
    # when the run fails
    keep = write("keep.json", b"old")
    onorm("bench", "--backend", "cpu", "--widths", "68719476736", "--json", keep, expect=1)
    check(open(keep).read() == "old", "existing --json file overwritten by a failed run")
    fresh = os.path.join(WORK, "fresh.json")
    onorm("bench", "--backend", "cpu", "--widths", "68719476736", "--json", fresh, expect=1)
    check(not os.path.exists(fresh), "empty --json file left behind")


def max_rss_mb(args):
    """Runs onorm and returns (exit status, stdout, stderr, peak resident MB of the child)."""
    proc = subprocess.Popen([ONORM] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    out, err = proc.communicate(timeout=300)
    import resource
    # RUSAGE_CHILDREN is the largest of the waited-for children: this test runs just one first
    return proc.returncode, out, err, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


def test_bench_memory():
    # Softmax of one 64 MB row: x on the host while it is generated, x and y in the backend's
    # memory. No gamma/beta (softmax takes none) and no float copy of the whole input.
    if not SANITIZED:
        rc, out, err, mb = max_rss_mb(["bench", "--backend", "cpu", "--ops", "softmax", "--dtypes", "f32",
                                       "--widths", 1 << 24, "--mb", 1, "--iters", 1])
        check(rc == 0, err)
        check(mb < 320, "peak resident %.0f MB for a 64 MB row (x, y and a host copy are 192 MB)" % mb)
    # Widths that cannot fit are refused before anything is allocated (the address space is
    # capped at 4 GiB: trying would fail with "out of host memory"), the rest are measured.
    # Without the cap (sanitized builds) only a width no machine holds is used.
    big = [68719476736] if SANITIZED else [1073741824, 68719476736]
    out_json = os.path.join(WORK, "bench_mem.json")
    p = onorm("bench", "--backend", "cpu", "--ops", "softmax,layer_norm", "--dtypes", "f32", "--widths",
              ",".join(str(w) for w in [64] + big), "--mb", 1, "--iters", 1, "--json", out_json, mem_gib=4,
              expect=0)
    for w in big:
        for op in ["softmax", "layer_norm"]:
            check(("skipping %s f32 cols=%d: needs about" % (op, w)) in p.stderr and "available" in p.stderr,
                  p.stderr)
    j = json.load(open(out_json))
    validate_bench_json(j)
    check(sorted((r["op"], r["cols"]) for r in j["results"]) == [("layer_norm", 64), ("softmax", 64)], j["results"])
    check(len(j["skipped"]) == 2 * len(big) and all("memory" in s["reason"] for s in j["skipped"]), j["skipped"])
    # nothing fits: an error, quickly, before any allocation
    p = onorm("bench", "--backend", "cpu", "--widths", str(big[0]), "--mb", 1, mem_gib=4, expect=1)
    check("no case fits in memory" in p.stderr and "out of host memory" not in p.stderr, p.stderr)


def test_bench_setup_interrupt():
    # Ctrl-C while the input is being generated stops there: no copy measured, no case, the
    # (empty) results written, exit 130.
    out = os.path.join(WORK, "bench_setup_int.json")
    proc = subprocess.Popen([ONORM, "bench", "--backend", "cpu", "--ops", "softmax", "--dtypes", "f32",
                             "--widths", "4096", "--mb", "128", "--iters", "3", "--json", out],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()
    check(first.startswith("setting up f32"), "no setup line: %r" % first)
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=120)
    check(proc.returncode == 130, "exit %d after SIGINT (want 130)\n%s" % (proc.returncode, err))
    check("device copy" not in rest and "interrupted: 0 of 1" in rest, rest)
    j = json.load(open(out))
    validate_bench_json(j, copy_measured=False)
    check(j["interrupted"] is True and j["results"] == [], j)


def test_bench_interrupt():
    out = os.path.join(WORK, "bench_int.json")
    widths = ",".join(str(64 * (i % 8 + 1)) for i in range(400))
    e = dict(os.environ)
    proc = subprocess.Popen([ONORM, "bench", "--backend", "cpu", "--ops", "softmax", "--dtypes", "f32", "--widths",
                             widths, "--mb", "4", "--iters", "3", "--json", out], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=e)
    # wait for the first case to finish, then Ctrl-C
    lines = [proc.stdout.readline() for _ in range(3)]  # setup, the copy, the first case
    check("[  1/400]" in lines[2], "no progress line: %r" % lines)
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=120)
    check(proc.returncode == 130, "exit %d after SIGINT (want 130)\n%s" % (proc.returncode, err))
    check("interrupted" in rest, rest)
    j = json.load(open(out))
    validate_bench_json(j)
    check(j["interrupted"] is True and 1 <= len(j["results"]) < 400, (j["interrupted"], len(j["results"])))


def test_bench_png():
    png = os.path.join(WORK, "bench.png")
    args = ["bench", "--backend", "cpu", "--ops", "softmax,rms_norm", "--dtypes", "f32", "--widths", "64,256,2048",
            "--mb", 1, "--iters", 1, "--png", png]
    # no usable python: a clear error, the measurements are not lost silently
    p = onorm(*args, env={"ONORM_PYTHON": "/nonexistent/python3"})
    check(p.returncode == 1 and "python3" in p.stderr and "--png" in p.stderr, p.stderr)
    # ... and the JSON it names is still there, with the measurements
    check("the JSON is at " in p.stderr, p.stderr)
    kept = p.stderr.split("the JSON is at ")[1].split()[0]
    check(os.path.exists(kept), "the JSON %s named by the message is gone" % kept)
    j = json.load(open(kept))
    validate_bench_json(j)
    check(len(j["results"]) == 6, j["results"])
    os.remove(kept)
    # a python without matplotlib (this interpreter, with matplotlib hidden)
    fake = os.path.join(WORK, "nompl")
    os.makedirs(os.path.join(fake, "matplotlib"), exist_ok=True)
    with open(os.path.join(fake, "matplotlib", "__init__.py"), "w") as f:
        f.write("raise ImportError('hidden for the test')\n")
    p = onorm(*args, env={"ONORM_PYTHON": sys.executable, "PYTHONPATH": fake})
    check(p.returncode == 1 and "matplotlib" in p.stderr, p.stderr)
    # the real thing, where some python3 on this machine has matplotlib
    have = any(subprocess.run([py, "-c", "import matplotlib"], capture_output=True).returncode == 0
               for py in ["python3", "/usr/bin/python3"] if os.path.exists(py) or py == "python3")
    if not have:
        print("SKIP: no python3 with matplotlib here")
        return 77
    p = onorm(*args, expect=0)
    with open(png, "rb") as f:
        check(f.read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG")
    check(os.path.getsize(png) > 5000, "PNG suspiciously small")


def test_backward():
    """The backward ops read two inputs (y, and dy generated like x): within the bound on every
    command, in mixed dtypes, from a file (dy generated), and the bytes moved count both inputs."""
    out = os.path.join(WORK, "bwd.json")
    for op in ["softmax_backward", "log_softmax_backward"]:
        for dt, out_dt in [("f32", "f32"), ("bf16", "f32"), ("f16", "bf16")]:
            p = onorm("compare", "--op", op, "--rows", 9, "--cols", 700, "--dtype", dt, "--out-dtype",
                      out_dt, "--backends", "cpu,cpu", "--iters", 1, "--json", out, expect=0)
            check("%s 9x700 %s -> %s" % (op, dt, out_dt) in p.stdout.splitlines()[0], p.stdout)
            _, rows = parse_table(p.stdout)
            check(all(r["bound"] == "ok" for r in rows) and rows[0]["!=cpu#2"] == "0", rows)
            j = json.load(open(out))
            validate_compare_json(j, 2)
            size = {"f32": 4, "f16": 2, "bf16": 2}
            check(j["backends"][0]["bytes_moved"] == 9 * 700 * (2 * size[dt] + size[out_dt]), j["backends"][0])
        for dist in ["normal", "uniform", "large-offset", "special"]:
            onorm("compare", "--op", op, "--rows", 16, "--cols", 100, "--dist", dist, "--backends", "cpu",
                  "--iters", 1, expect=0)
        p = onorm("run", "--op", op, "--rows", 8, "--cols", 4097, "--backend", "cpu", "--iters", 1, expect=0)
        check("%s 8x4097 f32 -> f32 on cpu" % op in p.stdout and "inputs read" in p.stdout, p.stdout)
        f32 = write("y.npy", npy_bytes("<f4", (3, 40), struct.pack("<120f", *[1.0 / (1 + i % 40) for i in range(120)])))
        p = onorm("compare", "--op", op, "--input", f32, "--backends", "cpu", "--iters", 1, expect=0)
        check("%s 3x40 f32 -> f32" % op in p.stdout, p.stdout)
    bench = os.path.join(WORK, "bwd_bench.json")
    onorm("bench", "--backend", "cpu", "--ops", "softmax_backward,log_softmax_backward,softmax", "--dtypes", "f32",
          "--widths", "64,1024", "--mb", 1, "--iters", 1, "--json", bench, expect=0)
    j = json.load(open(bench))
    check(len(j["results"]) == 6, j["results"])
    for r in j["results"]:
        n = 3 if r["op"].endswith("_backward") else 2
        check(r["bytes_moved"] == r["rows"] * r["cols"] * 4 * n, r)

# The norm ops of onorm_norm / onorm_norm_backward: (LayerNorm?, backward?, residual?, quantized y dtype).
NORM_OPS = {
    "add_rms_norm": (False, False, True, None),
    "add_layer_norm": (True, False, True, None),
    "rms_norm_fp8": (False, False, False, "f8_e4m3"),
    "rms_norm_i8": (False, False, False, "i8"),
    "layer_norm_fp8": (True, False, False, "f8_e4m3"),
    "layer_norm_i8": (True, False, False, "i8"),
    "rms_norm_backward": (False, True, False, None),
    "layer_norm_backward": (True, True, False, None),
}
SIZE = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i8": 1, "f8_e4m3": 1}


def norm_bytes(op, rows, cols, dtype, out_dtype, param_dtype):
    """The bytes a norm op moves: every tensor it reads or writes once (x, dy or the residual,
    residual_out, y or dx, gamma/beta, mean/rstd, y_scale, dgamma/dbeta)."""
    layer, backward, residual, quant = NORM_OPS[op]
    x, y = rows * cols * SIZE[dtype], rows * cols * SIZE[out_dtype]
    per_param, stats = cols * SIZE[param_dtype], (2 if layer else 1) * rows * 4
    if backward:  # x, dy, gamma, mean/rstd read; dx, dgamma (and dbeta) written
        return 2 * x + y + per_param + stats + (2 if layer else 1) * cols * 4
    return x + y + (2 if layer else 1) * per_param + stats + (2 * x if residual else 0) + (rows * 4 if quant else 0)


def test_norm_ops_compare():
    """Every norm op on two CPU contexts: within the bound, deterministic, the output dtype and
    options named; the JSON carries them and the bytes every tensor moves."""
    out = os.path.join(WORK, "norm.json")
    for op, (layer, backward, residual, quant) in NORM_OPS.items():
        for dt in ["f32", "bf16"]:
            p = onorm("compare", "--op", op, "--rows", 37, "--cols", 300, "--dtype", dt, "--backends", "cpu,cpu",
                      "--iters", 1, "--json", out, expect=0)
            out_dt = quant or dt
            first = p.stdout.splitlines()[0]
            check("%s 37x300 %s -> %s" % (op, dt, out_dt) in first, first)
            check("params %s, weight offset 0" % dt in first, first)
            head, rows = parse_table(p.stdout)
            check([r["backend"] for r in rows] == ["cpu", "cpu#2"], rows)
            for r in rows:
                check(r["bound"] == "ok" and float(r["GB/s"]) > 0, r)
                if quant:  # the distance on the quantized grid: the reference's value or a neighbour
                    check(float(r["max_ulp"]) <= 1, r)
                    check(0 < float(r["max_abs"]) < 1, r)  # dequantized: the grid's steps show
            check(rows[0]["!=cpu#2"] == "0" and rows[1]["!=cpu"] == "0", "not deterministic? %r" % rows)
            j = json.load(open(out))
            validate_compare_json(j, 2)
            check(j["op"] == op and j["out_dtype"] == out_dt and j["param_dtype"] == dt and j["weight_offset"] == 0, j)
            want = norm_bytes(op, 37, 300, dt, out_dt, dt)
            check(all(b["bytes_moved"] == want for b in j["backends"]), (want, j["backends"]))
            # what is checked: y (dx), and residual_out, y_scale, statistics, dgamma/dbeta
            extra = 37 * 300 * residual + 37 * bool(quant) + (37 * (1 + layer) if not backward else 300 * (1 + layer))
            check(j["backends"][0]["checked"] == 37 * 300 + extra, (extra, j["backends"][0]["checked"]))
        # other dtypes, parameters and offsets, the special values, a .npy input
        p = onorm("compare", "--op", op, "--rows", 9, "--cols", 257, "--dtype", "bf16", "--param-dtype", "f32",
                  "--weight-offset", 1, "--backends", "cpu", "--iters", 1, "--json", out, expect=0)
        check("params f32, weight offset 1" in p.stdout.splitlines()[0], p.stdout)
        j = json.load(open(out))
        check(j["param_dtype"] == "f32" and j["weight_offset"] == 1, j)
        if not quant:
            onorm("compare", "--op", op, "--rows", 9, "--cols", 257, "--dtype", "f16", "--out-dtype", "f32",
                  "--param-dtype", "f64", "--weight-offset", -0.5, "--backends", "cpu", "--iters", 1, expect=0)
        for dist in ["uniform", "large-offset", "special"]:
            onorm("compare", "--op", op, "--rows", 16, "--cols", 100, "--dtype", "f16", "--dist", dist,
                  "--backends", "cpu", "--iters", 1, expect=0)
        x = write("norm_x.npy", npy_bytes("<f4", (3, 40), struct.pack("<120f", *[(i % 13) / 3.0 - 2 for i in range(120)])))
        p = onorm("compare", "--op", op, "--input", x, "--backends", "cpu", "--iters", 1, expect=0)
        check("%s 3x40 f32 -> %s" % (op, quant or "f32") in p.stdout, p.stdout)
    # a violation is caught: one element of y (dx) moved far off
    for op, ulps, what in [("add_rms_norm", 100000, "y"), ("rms_norm_fp8", 3, "y"), ("layer_norm_i8", 3, "y"),
                           ("layer_norm_backward", 100000, "dx")]:
        p = onorm("compare", "--op", op, "--rows", 8, "--cols", 128, "--backends", "cpu,cpu", "--iters", 1,
                  "--perturb-ulps", "%d@cpu#2" % ulps, "--json", out, expect=3)
        _, rows = parse_table(p.stdout)
        check(rows[0]["bound"] == "ok" and rows[1]["bound"] == "FAIL(1)" and rows[1]["!=cpu"] == "1", rows)
        j = json.load(open(out))
        check(j["backends"][1]["first_violation"]["what"] == what, j["backends"][1])


def test_norm_ops_run():
    """run over the norm ops: within the bound, and the bandwidth counts every tensor once."""
    cases = [("rms_norm_fp8", "bf16", "f8_e4m3", "x, gamma read + y, y_scale, rstd written once"),
             ("add_rms_norm", "bf16", "bf16", "x, residual, gamma read + residual_out, y, rstd written once"),
             ("add_layer_norm", "f32", "f32",
              "x, residual, gamma, beta read + residual_out, y, mean, rstd written once"),
             ("layer_norm_i8", "f16", "i8", "x, gamma, beta read + y, y_scale, mean, rstd written once"),
             ("rms_norm_backward", "bf16", "bf16", "x, dy, gamma, rstd read + dx, dgamma written once"),
             ("layer_norm_backward", "f32", "f32", "x, dy, gamma, mean, rstd read + dx, dgamma, dbeta written once")]
    for op, dt, out_dt, moved in cases:
        # tall and narrow: the per-row floats (statistics, y_scale) show in the MB figure
        p = onorm("run", "--op", op, "--rows", 2048, "--cols", 16, "--dtype", dt, "--backend", "cpu", "--iters", 3,
                  expect=0)
        out = p.stdout
        check("%s 2048x16 %s -> %s on cpu" % (op, dt, out_dt) in out, out)
        check("bound      holds" in out and ("ulp(%s)" % out_dt) in out, out)
        check(moved in out, "%r not in %s" % (moved, out))
        t = float(out.split("time")[1].split("ms")[0])
        gb = float(out.split("bandwidth")[1].split("GB/s")[0])
        mb = float(out.split("written once: ")[1].split("MB")[0])
        want = norm_bytes(op, 2048, 16, dt, out_dt, dt)
        check(abs(mb * 1e6 - want) <= 500, "MB %g vs %d bytes" % (mb, want))
        check(abs(gb - want / (t * 1e-3) / 1e9) / gb < 0.02, "bandwidth %g vs time %g" % (gb, t))
    onorm("run", "--op", "add_rms_norm", "--rows", 8, "--cols", 128, "--backend", "cpu", "--iters", 1,
          "--perturb-ulps", 100000, expect=3)


def test_norm_ops_usage():
    every = list(NORM_OPS) + ["softmax", "log_softmax", "layer_norm", "rms_norm", "softmax_backward",
                              "log_softmax_backward"]
    shape = ["--rows", "4", "--cols", "8"]
    expect_usage_errors([
        (["run", "--op", "add_rms_norm", *shape, "--weight-offset", "abc"], "not a finite number"),
        (["run", "--op", "add_rms_norm", *shape, "--weight-offset", "inf"], "not a finite number"),
        (["compare", "--op", "add_rms_norm", *shape, "--param-dtype", "i8"], "unknown dtype"),
        (["compare", "--op", "softmax", *shape, "--weight-offset", "1"], "does not apply"),
        (["run", "--op", "layer_norm", *shape, "--param-dtype", "bf16"], "does not apply"),
        (["run", "--op", "rms_norm_i8", *shape, "--out-dtype", "f16"], "writes y as i8"),
    ])
    # an unknown op: the message names every op, the usage is the command's own
    for args in [["compare", "--op", "rms_norm_fp16", *shape], ["bench", "--ops", "add_rms_norm,nope"]]:
        p = onorm(*args, expect=2)
        message, usage = p.stderr.split("usage:", 1)
        check("unknown op" in message and all(n in message for n in every), p.stderr)
        check(usage.startswith(" onorm " + args[0]) and p.stdout == "", p.stderr)
    for cmd in ["run", "compare"]:
        text = onorm(cmd, "--help", expect=0).stdout
        check(all(n in text for n in every) and "--weight-offset" in text and "--param-dtype" in text, text)
    check("any --op of onorm run" in onorm("bench", "--help", expect=0).stdout, "bench --help")


def test_norm_ops_bench():
    out = os.path.join(WORK, "norm_bench.json")
    ops = ["add_rms_norm", "add_layer_norm", "rms_norm_fp8", "layer_norm_i8", "rms_norm_backward",
           "layer_norm_backward"]
    p = onorm("bench", "--backend", "cpu", "--ops", ",".join(ops + ["softmax"]), "--dtypes", "f32,bf16",
              "--widths", "64,1000", "--mb", 1, "--iters", 1, "--json", out, expect=0)
    for op in ops:
        check(any(l.startswith(op + " ") and "GB/s" not in l and float(l.split()[5]) > 0
                  for l in p.stdout.splitlines()), "no bandwidth for %s in\n%s" % (op, p.stdout))
        check(any(op in l and "GB/s" in l for l in p.stdout.splitlines()), p.stdout)  # the progress lines
    j = json.load(open(out))

    def bytes_of(r):
        if r["op"] in NORM_OPS:
            return norm_bytes(r["op"], r["rows"], r["cols"], r["dtype"], r["out_dtype"], r["dtype"])
        return list_op_bytes(r)
    validate_bench_json(j, bytes_of=bytes_of)
    check(len(j["results"]) == 2 * 2 * (len(ops) + 1) and j["skipped"] == [], j)
    for r in j["results"]:
        check(r["out_dtype"] == (NORM_OPS.get(r["op"], (0, 0, 0, None))[3] or r["dtype"]), r)
        # every case moves about --mb: rows fill what gamma and the other per-column tensors leave
        check(1e6 - bytes_of(dict(r, rows=1)) < r["bytes_moved"] <= 1e6, r)



def test_row_ops_compare():
    """cross_entropy and softmax_topk on two CPU contexts: within the bound, deterministic, their
    options named in the heading and the JSON; a violation of each output is caught."""
    out = os.path.join(WORK, "row.json")
    cases = [("cross_entropy", ["--label-smoothing", 0.1, "--z-loss", 1e-4], "label smoothing 0.1, z-loss 0.0001"),
             ("softmax_topk", ["--k", 5], "k 5")]
    for op, options, named in cases:
        for dt in ["f32", "f16", "bf16"]:
            p = onorm("compare", "--op", op, "--rows", 37, "--cols", 300, "--dtype", dt, "--backends", "cpu,cpu",
                      "--iters", 1, "--json", out, *options, expect=0)
            first = p.stdout.splitlines()[0]
            check("%s 37x300 %s -> %s" % (op, dt, dt) in first and named in first, first)
            _, rows = parse_table(p.stdout)
            check(all(r["bound"] == "ok" for r in rows), rows)
            check(rows[0]["!=cpu#2"] == "0" and rows[1]["!=cpu"] == "0", "not deterministic? %r" % rows)
            j = json.load(open(out))
            validate_compare_json(j, 2)
            size = {"f32": 4, "f16": 2, "bf16": 2}[dt]
            if op == "cross_entropy":
                check(j["label_smoothing"] == 0.1 and j["z_loss"] == 1e-4, j)
                # loss and lse of each row, and each gradient element
                check(j["backends"][0]["checked"] == 37 * 2 + 37 * 300, j["backends"][0])
                want = 37 * 300 * 2 * size + 37 * (8 + 4 + 4)
            else:
                check(j["k"] == 5, j)
                check(j["backends"][0]["checked"] >= 37 * 5, j["backends"][0])
                want = 37 * 300 * size + 37 * 5 * (size + 8)
            check(all(b["bytes_moved"] == want for b in j["backends"]), (want, j["backends"]))
        p = onorm("compare", "--op", op, "--rows", 8, "--cols", 128, "--backends", "cpu,cpu", "--iters", 1,
                  "--perturb-ulps", "100000@cpu#2", "--json", out, *options, expect=3)
        _, rows = parse_table(p.stdout)
        check(rows[0]["bound"] == "ok" and rows[1]["bound"] == "FAIL(1)", rows)
        what = json.load(open(out))["backends"][1]["first_violation"]["what"]
        check(what == ("dlogits" if op == "cross_entropy" else "values"), what)
    # a .npy input: the top k of a known row
    x = write("topk_x.npy", npy_bytes("<f4", (1, 6), struct.pack("<6f", 0.5, 3.0, -1.0, 3.0, 2.0, 0.0)))
    onorm("compare", "--op", "softmax_topk", "--input", x, "--k", 6, "--backends", "cpu", "--iters", 1, expect=0)
    p = onorm("run", "--op", "softmax_topk", "--rows", 64, "--cols", 512, "--k", 16, "--backend", "cpu",
              "--iters", 1, expect=0)
    check("x read + values, indices written once" in p.stdout, p.stdout)


def test_row_ops_usage():
    shape = ["--rows", "4", "--cols", "8"]
    expect_usage_errors([
        (["compare", "--op", "softmax_topk", *shape, "--k", "9"], "exceeds --cols 8"),
        (["compare", "--op", "softmax_topk", *shape, "--k", "0"], "--k"),
        (["compare", "--op", "softmax", *shape, "--k", "2"], "does not apply"),
        (["run", "--op", "softmax_topk", *shape, "--z-loss", "1"], "does not apply"),
        (["compare", "--op", "cross_entropy", *shape, "--label-smoothing", "1.5"], "must be in [0, 1]"),
        (["compare", "--op", "cross_entropy", *shape, "--z-loss", "-1"], "must be >= 0"),
        (["bench", "--ops", "cross_entropy"], "not benchmarked by bench"),
    ])
    for cmd in ["run", "compare"]:
        text = onorm(cmd, "--help", expect=0).stdout
        check("cross_entropy" in text and "softmax_topk" in text and "--label-smoothing" in text, text)


TESTS = {n[5:]: f for n, f in globals().items() if n.startswith("test_")}


def main():
    global ONORM, WORK
    if len(sys.argv) < 3 or sys.argv[2] not in TESTS:
        sys.stderr.write(__doc__)
        return 2
    ONORM = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="onorm_cli_") as tmp:
        WORK = sys.argv[3] if len(sys.argv) > 3 else tmp
        os.makedirs(WORK, exist_ok=True)
        try:
            rc = TESTS[sys.argv[2]]()
        except Failure as e:
            print("FAIL: %s" % e)
            return 1
    if rc == 77:
        return 77
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
