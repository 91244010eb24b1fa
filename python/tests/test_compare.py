"""onlinenorm.compare: onorm compare's document (schema onorm-compare/1) on the CPU backend."""
import numpy as np
import pytest

import onlinenorm as on
from onlinenorm import _onlinenorm as ext

R, C = 6, 200

# op, options, max_abs_err allowed, bytes one call moves (tools/README.md: the list's ops count
# x (and dy) read and y written; the norm ops every tensor once).
CASES = [
    ("softmax", {}, 1e-6, R * C * 8),
    ("layer_norm", {}, 1e-5, R * C * 8),
    ("rms_norm", {"dtype": "f16"}, 4e-3, R * C * 4),
    ("softmax_backward", {}, 1e-4, R * C * 12),
    ("rms_norm_backward", {"dtype": "bf16"}, 0.1, R * C * 6 + C * 2 + R * 4 + C * 4),
    ("layer_norm_backward", {"out_dtype": "f16"}, 4e-3, R * C * 10 + C * 4 + R * 8 + C * 8),
    ("rms_norm_fp8", {"dtype": "bf16", "param_dtype": "f32", "weight_offset": 1.0}, 1.0, R * C * 3 + C * 4 + R * 8),
    ("add_layer_norm", {"dtype": "bf16"}, 0.05, R * C * 8 + C * 4 + R * 8),
    ("layer_norm_i8", {}, 0.1, R * C * 5 + C * 8 + R * 12),
]


@pytest.mark.parametrize("op,options,max_abs,moved", CASES, ids=[c[0] for c in CASES])
def test_compare_cpu(op, options, max_abs, moved):
    d = on.compare(op, R, C, backends="cpu", iters=1, **options)
    assert d["schema"] == "onorm-compare/1" and isinstance(d["version"], str)
    assert (d["op"], d["rows"], d["cols"], d["eps"]) == (op, R, C, 1e-5)
    assert d["dtype"] == options.get("dtype", "f32")
    quantized = {"rms_norm_fp8": "f8_e4m3", "layer_norm_i8": "i8"}
    assert d["out_dtype"] == quantized.get(op, options.get("out_dtype", d["dtype"]))
    norm_op = op not in ("softmax", "layer_norm", "rms_norm", "softmax_backward")
    assert ("param_dtype" in d) == norm_op and ("weight_offset" in d) == norm_op
    if norm_op:
        assert d["param_dtype"] == options.get("param_dtype", d["dtype"])
        assert d["weight_offset"] == options.get("weight_offset", 0.0)
    assert d["input"] == {"source": "generated", "dist": "normal", "seed": 1}
    assert [b["label"] for b in d["backends"]] == ["cpu"] and d["pairs"] == []
    b = d["backends"][0]
    assert (b["backend"], b["device_index"], b["error"]) == ("cpu", 0, None)
    assert b["device"].startswith("cpu")
    assert b["bound_ok"] and b["violations"] == 0 and b["first_violation"] is None
    assert b["checked"] >= R * C
    assert 0 <= b["max_abs_err"] <= max_abs and 0 <= b["max_rel_err"] and 0 <= b["max_ulp_err"]
    if op in quantized:  # a step of the quantized grid at most
        assert b["max_ulp_err"] <= 1.0
    assert b["bytes_moved"] == moved
    assert b["time_ms"] > 0 and b["gbps"] > 0 and b["samples"] == 1 and b["calls_per_sample"] >= 1
    assert b["bitwise_diff"] == {}
    assert d["bound_ok"] is True and d["errors"] is False


@pytest.mark.parametrize("op", ["softmax", "add_rms_norm", "rms_norm_i8", "layer_norm_backward"])
@pytest.mark.parametrize("backends", ["cpu,cpu", ["cpu", "cpu"]])
def test_repeated_backend_is_bitwise_equal(op, backends):
    d = on.compare(op, 33, 1000, dtype="bf16", backends=backends, iters=1, dist="uniform")
    assert [b["label"] for b in d["backends"]] == ["cpu", "cpu#2"]
    assert d["backends"][0]["bitwise_diff"] == {"cpu#2": 0}
    assert d["backends"][1]["bitwise_diff"] == {"cpu": 0}
    assert d["pairs"] == [{"a": "cpu", "b": "cpu#2", "differing_elements": 0}]
    assert d["bound_ok"] and all(b["bound_ok"] for b in d["backends"])


def test_violation_is_reported():
    # The tool's hidden --perturb-ulps (through the extension): one element of the first backend
    # moved by 100000 ulp is outside the bound and differs from the second.
    import json

    options = {"op": "softmax", "rows": "4", "cols": "64", "backends": "cpu,cpu", "iters": "1", "perturb-ulps": "100000"}
    d = json.loads(ext.compare(options, None))
    first, second = d["backends"]
    assert not first["bound_ok"] and first["violations"] == 1 and first["max_ulp_err"] >= 1e5
    assert first["first_violation"]["what"] == "y" and set(first["first_violation"]) == {"what", "row", "col", "got", "want"}
    assert second["bound_ok"] and second["first_violation"] is None
    assert d["pairs"][0]["differing_elements"] == 1
    assert d["bound_ok"] is False and d["errors"] is False


def test_seed_and_dist_select_the_input():
    a = on.compare("layer_norm", 8, 300, backends="cpu", iters=1, seed=5)["backends"][0]
    b = on.compare("layer_norm", 8, 300, backends="cpu", iters=1, seed=5)["backends"][0]
    c = on.compare("layer_norm", 8, 300, backends="cpu", iters=1, seed=6)["backends"][0]
    keys = ("max_abs_err", "max_rel_err", "max_ulp_err")
    assert [a[k] for k in keys] == [b[k] for k in keys] != [c[k] for k in keys]
    d = on.compare("softmax", 8, 300, backends="cpu", iters=1, dist="special")
    assert d["input"]["dist"] == "special" and d["bound_ok"]


def test_x_as_array(rng):
    # Constant rows of a power-of-two width: softmax is exactly 1/64, so no error at all (a
    # generated input would show some): x is what ran.
    d = on.compare("softmax", x=np.full((5, 64), 0.7, np.float32), backends="cpu", iters=1)
    assert (d["rows"], d["cols"], d["dtype"]) == (5, 64, "f32")
    assert d["input"] == {"source": "array", "seed": 1}
    b = d["backends"][0]
    assert b["bound_ok"] and b["max_abs_err"] == 0 and b["checked"] == 5 * 64

    x64 = rng.standard_normal((7, 50)) * 3
    as_f64 = on.compare("rms_norm", x=x64, backends="cpu", iters=1)
    assert as_f64["dtype"] == "f64" and as_f64["bound_ok"]
    # float64 rounded to dtype, as --input does, equals the float32 array; any layout is taken.
    rounded = on.compare("rms_norm", x=x64, dtype="f32", backends="cpu", iters=1)["backends"][0]
    x32 = np.asfortranarray(x64.astype(np.float32))
    direct = on.compare("rms_norm", 7, 50, x=x32, dtype=np.float32, backends="cpu", iters=1)["backends"][0]
    assert rounded["max_abs_err"] == direct["max_abs_err"] and rounded["max_ulp_err"] == direct["max_ulp_err"]
    f16 = on.compare("log_softmax", x=x64[:, ::2].astype(np.float16), backends="cpu", iters=1)
    assert (f16["rows"], f16["cols"], f16["dtype"]) == (7, 25, "f16") and f16["bound_ok"]
    bf16 = on.compare("softmax", x=(x32.view(np.uint32) >> 16).astype(np.uint16), dtype="bf16", backends="cpu", iters=1)
    assert bf16["dtype"] == "bf16" and bf16["bound_ok"]


@pytest.mark.parametrize(
    "args,kwargs,match",
    [
        (("nope", 4, 8), {}, "unknown op 'nope'"),
        (("softmax", 4, 8), {"dtype": "f99"}, "unknown dtype 'f99'"),
        (("softmax", 4, 8), {"dtype": np.int8}, "unknown dtype 'int8'"),
        (("softmax", 4, 8), {"dtype": object()}, "dtype: .* is not a dtype"),
        (("softmax", 4, 8), {"out_dtype": "f8"}, "unknown dtype 'f8'"),
        (("rms_norm_i8", 4, 8), {"out_dtype": "f32"}, "writes y as i8"),
        (("softmax", 4, 8), {"weight_offset": 1.0}, "does not apply to softmax"),
        (("softmax", 4), {}, "missing --cols"),
        (("softmax", 0, 8), {}, "outside"),
        (("softmax", 4, 8), {"backends": "gpu"}, "unknown backend 'gpu'"),
        (("softmax", 4, 8), {"backends": []}, "unknown backend ''"),
        (("softmax", 4, 8), {"dist": "gauss"}, "unknown distribution"),
        (("softmax", 4, 8), {"iters": 0}, "iters"),
        (("softmax", 4, 8), {"eps": -1.0}, "eps"),
        (("softmax", 4, 8), {"seed": -1}, "seed"),
        (("softmax",), {"x": np.zeros((2, 3, 4), np.float32)}, "x: expected a 2-D array"),
        (("softmax",), {"x": np.zeros((2, 3), np.int32)}, "x: dtype '<i4' is not float32"),
        (("softmax",), {"x": np.zeros((2, 3), np.float16), "dtype": "f32"}, "x: holds f16"),
        (("softmax",), {"x": np.zeros((2, 0), np.float32)}, "x: empty array"),
        (("softmax", 3), {"x": np.zeros((2, 3), np.float32)}, "x: has 2 rows"),
        (("softmax",), {"x": np.zeros((2, 3), np.float32), "dist": "normal"}, "exclude each other"),
    ],
)
def test_bad_arguments_raise_value_error(args, kwargs, match):
    with pytest.raises(ValueError, match=match) as e:
        on.compare(*args, **{"iters": 1, **kwargs})
    assert "usage:" not in str(e.value) and not str(e.value).endswith("\n")


def test_unavailable_backend_raises_runtime_error():
    if on.info()["backends"]["hip"]["devices"] > 0:
        pytest.skip("HIP is available here")
    with pytest.raises(RuntimeError, match="backend hip:0 is unavailable"):
        on.compare("softmax", 4, 8, backends="cpu,hip")
