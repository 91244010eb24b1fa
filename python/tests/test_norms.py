"""layer_norm, rms_norm, norm (residual, weight offset, quantized y) and the norms' backward
passes on numpy arrays against the float64 reference."""
import numpy as np
import pytest

import onlinenorm
import reference as ref
from conftest import NUMPY_DTYPES, WIDTHS, poisoned, random_rows


def norm_bound(r, mean, rstd, scale):
    """The contract's bound: F32 terms plus a few ulps of the row mean (LayerNorm)."""
    mean_term = 0.0 if mean is None else 2.0**-20 * np.abs(mean)[..., None] * rstd[..., None] * np.abs(scale)
    return 1e-5 * np.abs(r) + 1e-6 + mean_term


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("cols", WIDTHS)
def test_layer_norm_matches_reference(rng, dtype, cols):
    x = random_rows(rng, (2, 3, cols), dtype) + np.asarray(2.0, dtype)
    gamma = random_rows(rng, (cols,), dtype)
    beta = random_rows(rng, (cols,), dtype)
    out = poisoned(x.shape, dtype)
    y, mean, rstd = onlinenorm.layer_norm(x, gamma, beta, 1e-5, out=out, return_stats=True)
    assert y is out and mean.shape == rstd.shape == x.shape[:-1] and mean.dtype == np.float32
    xd, gd, bd = (a.astype(np.float64) for a in (x, gamma, beta))
    r, rm, rr = ref.layer_norm(xd, gd, bd, 1e-5)
    ref.assert_within(y, r, norm_bound(r, rm, rr, gd), dtype, "layer_norm")
    ref.assert_within(mean, rm, 1e-6 * np.abs(rm) + 1e-6, "float32", "mean")
    ref.assert_within(rstd, rr, 1e-5 * rr, "float32", "rstd")


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("cols", WIDTHS)
def test_rms_norm_matches_reference(rng, dtype, cols):
    x = random_rows(rng, (4, cols), dtype)
    gamma = random_rows(rng, (cols,), dtype)
    y, rstd = onlinenorm.rms_norm(x, gamma, return_stats=True)
    assert y.dtype == x.dtype
    xd, gd = x.astype(np.float64), gamma.astype(np.float64)
    r, rr = ref.rms_norm(xd, gd, 1e-6)
    ref.assert_within(y, r, norm_bound(r, None, rr, gd), dtype, "rms_norm")
    ref.assert_within(rstd, rr, 1e-5 * rr, "float32", "rstd")


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
def test_y_is_the_same_with_and_without_the_statistics(rng, kind):
    # Without return_stats no statistics are allocated or written: y must not change.
    x = random_rows(rng, (5, 300), np.float32) + np.float32(3.0)
    gamma = random_rows(rng, (300,), np.float32)
    fn = getattr(onlinenorm, kind)
    cols = (gamma, random_rows(rng, (300,), np.float32)) if kind == "layer_norm" else (gamma,)
    plain = fn(x, *cols, out=poisoned(x.shape, np.float32))
    with_stats = fn(x, *cols, return_stats=True)
    assert not isinstance(plain, tuple) and len(with_stats) == (3 if kind == "layer_norm" else 2)
    np.testing.assert_array_equal(plain.view(np.uint32), with_stats[0].view(np.uint32))


def test_defaults_are_unit_scale_and_zero_shift(rng):
    x = random_rows(rng, (3, 50), "float32")
    xd = x.astype(np.float64)
    r, rm, rr = ref.layer_norm(xd, 1.0, 0.0, 1e-5)
    ref.assert_within(onlinenorm.layer_norm(x), r, norm_bound(r, rm, rr, 1.0), "float32", "layer_norm")
    r, rr = ref.rms_norm(xd, 1.0, 1e-6)
    ref.assert_within(onlinenorm.rms_norm(x, out_dtype="float16"), r, norm_bound(r, None, rr, 1.0), "float16", "rms_norm")


@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
def test_norm_with_residual_weight_offset_and_float32_params(rng, kind):
    x = random_rows(rng, (5, 127), "float16")
    residual = random_rows(rng, (5, 127), "float16")
    gamma = random_rows(rng, (127,), "float32", scale=0.1)
    beta = random_rows(rng, (127,), "float32") if kind == "layer_norm" else None
    residual_out = poisoned(x.shape, "float16")
    result = onlinenorm.norm(
        x, kind, gamma, beta, 1e-5, weight_offset=1.0, residual=residual, residual_out=residual_out,
        out_dtype="float32",
    )
    assert result.residual_out is residual_out and result.y.dtype == np.float32
    h = (x.astype(np.float32) + residual.astype(np.float32)).astype(np.float16)
    assert (residual_out == h).all()
    hd, scale = h.astype(np.float64), 1.0 + gamma.astype(np.float64)
    if kind == "layer_norm":
        r, rm, rr = ref.layer_norm(hd, scale, beta.astype(np.float64), 1e-5)
        ref.assert_within(result.mean, rm, 1e-6 * np.abs(rm) + 1e-6, "float32", "mean")
    else:
        (r, rr), rm = ref.rms_norm(hd, scale, 1e-5), None
        assert result.mean is None
    ref.assert_within(result.y, r, norm_bound(r, rm, rr, scale), "float32", kind)
    ref.assert_within(result.rstd, rr, 1e-5 * rr, "float32", "rstd")
    assert result.y_scale is None


def test_norm_allocates_residual_out_when_asked(rng):
    x = random_rows(rng, (2, 9), "float32")
    residual = random_rows(rng, (2, 9), "float32")
    result = onlinenorm.norm(x, "rms_norm", residual=residual, residual_out=True)
    assert (result.residual_out == x + residual).all()
    assert onlinenorm.norm(x, "rms_norm", residual=residual).residual_out is None


@pytest.mark.parametrize("cols", WIDTHS)
def test_int8_dynamic_quantization(rng, cols):
    x = random_rows(rng, (6, cols), "float32")
    out = poisoned(x.shape, "int8")
    result = onlinenorm.norm(x, "rms_norm", out=out)
    assert result.y is out and result.y_scale.shape == (6,)
    v, _ = ref.rms_norm(x.astype(np.float64), 1.0, 1e-6)
    scale = np.abs(v).max(axis=-1) / 127
    scale[scale == 0] = 1.0
    ref.assert_within(result.y_scale, scale, 1e-5 * scale, "float32", "y_scale")
    codes = np.clip(np.round(v / scale[:, None]), -127, 127)
    assert np.abs(out.astype(np.int64) - codes).max() <= 1, "a code is beyond a neighbour of the reference's"


def test_int8_static_quantization(rng):
    x = random_rows(rng, (3, 64), "float32")
    result = onlinenorm.norm(x, "layer_norm", out_dtype="int8", y_static_scale=0.02)
    assert result.y_scale is None
    v, _, _ = ref.layer_norm(x.astype(np.float64), 1.0, 0.0, 1e-5)
    codes = np.clip(np.round(v / 0.02), -127, 127)
    assert np.abs(result.y.astype(np.int64) - codes).max() <= 1


def test_float8_output_as_ml_dtypes_when_available(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = random_rows(rng, (4, 33), "float32")
    result = onlinenorm.norm(x, "rms_norm", out_dtype="float8_e4m3fn")
    assert result.y.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    v, _ = ref.rms_norm(x.astype(np.float64), 1.0, 1e-6)
    dequantized = result.y.astype(np.float64) * result.y_scale[:, None].astype(np.float64)
    # Neighbours on the E4M3 grid: 3 mantissa bits, so within 2^-3 relative (plus the scale's step).
    assert (np.abs(dequantized - v) <= 0.13 * np.abs(v) + 1e-3 * np.abs(v).max()).all()


def test_norm_bad_arguments_carry_the_library_message(rng):
    x = random_rows(rng, (3, 8), "float32")
    with pytest.raises(ValueError, match="gamma: has 7 elements, needs 8"):
        onlinenorm.layer_norm(x, random_rows(rng, (7,), "float32"))
    with pytest.raises(ValueError, match="onorm_norm: .*eps"):
        onlinenorm.rms_norm(x, eps=-1.0)
    with pytest.raises(ValueError, match="onorm_norm"):
        onlinenorm.norm(x, "rms_norm", beta=random_rows(rng, (8,), "float32"))
    with pytest.raises(ValueError, match="onorm_norm"):
        onlinenorm.norm(x, "layer_norm", residual_out=poisoned(x.shape, "float32"))  # no residual
    with pytest.raises(ValueError, match="kind"):
        onlinenorm.norm(x, "batch_norm")
    with pytest.raises(TypeError, match="one dtype"):
        onlinenorm.layer_norm(x, np.ones(8, np.float32), np.zeros(8, np.float16))
    with pytest.raises(ValueError, match="contiguous"):
        onlinenorm.layer_norm(x, np.ones(16, np.float32)[::2])
    out = poisoned(x.shape, "float32")
    with pytest.raises(ValueError, match="onorm_norm"):
        onlinenorm.norm(x, "rms_norm", out=out, y_static_scale=0.5)  # a float y takes no scale
    assert np.isnan(out).all()


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("cols", WIDTHS)
def test_layer_norm_backward_matches_reference(rng, dtype, cols):
    x = random_rows(rng, (2, 3, cols), dtype)
    dy = random_rows(rng, (2, 3, cols), dtype)
    gamma = random_rows(rng, (cols,), dtype)
    _, mean, rstd = onlinenorm.layer_norm(x, gamma, return_stats=True)
    out = poisoned(x.shape, dtype)
    dx, dgamma, dbeta = onlinenorm.layer_norm_backward(x, dy, mean, rstd, gamma, out=out)
    assert dx is out and dgamma.dtype == dbeta.dtype == np.float32 and dgamma.shape == (cols,)
    xd, dyd, gd = (a.astype(np.float64) for a in (x, dy, gamma))
    md, rd = mean.astype(np.float64), rstd.astype(np.float64)  # the backward takes them as given
    rdx, rdg, rdb = ref.norm_backward(xd, dyd, gd, md, rd)
    xhat = (xd - md[..., None]) * rd[..., None]
    g = dyd * gd
    bound = 1e-5 * (rd[..., None] * (np.abs(g) + np.abs(g).mean(-1, keepdims=True)
                                     + np.abs(xhat) * np.abs(g * xhat).mean(-1, keepdims=True))) + 1e-30
    ref.assert_within(dx, rdx, bound, dtype, "dx")
    ref.assert_within(dgamma, rdg, 1e-5 * np.abs(dyd * xhat).reshape(-1, cols).sum(0) + 1e-30, "float32", "dgamma")
    ref.assert_within(dbeta, rdb, 1e-5 * np.abs(dyd).reshape(-1, cols).sum(0) + 1e-30, "float32", "dbeta")


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("cols", WIDTHS)
def test_rms_norm_backward_with_dresidual_matches_reference(rng, dtype, cols):
    x = random_rows(rng, (5, cols), dtype)
    dy = random_rows(rng, (5, cols), dtype)
    dres = random_rows(rng, (5, cols), dtype)
    gamma = random_rows(rng, (cols,), "float32", scale=0.1)
    _, rstd = onlinenorm.rms_norm(x, return_stats=True)
    dx, dgamma = onlinenorm.rms_norm_backward(x, dy, rstd, gamma, weight_offset=1.0, dresidual=dres)
    xd, dyd, dd = (a.astype(np.float64) for a in (x, dy, dres))
    rd, scale = rstd.astype(np.float64), 1.0 + gamma.astype(np.float64)
    rdx, rdg, _ = ref.norm_backward(xd, dyd, scale, None, rd)
    xhat = xd * rd[..., None]
    g = dyd * scale
    bound = 1e-5 * (rd[..., None] * (np.abs(g) + np.abs(xhat) * np.abs(g * xhat).mean(-1, keepdims=True))
                    + np.abs(dd)) + 1e-30
    ref.assert_within(dx, rdx + dd, bound, dtype, "dx")
    ref.assert_within(dgamma, rdg, 1e-5 * np.abs(dyd * xhat).sum(0) + 1e-30, "float32", "dgamma")


def test_norm_backward_bad_arguments(rng):
    x = random_rows(rng, (3, 8), "float32")
    dy = random_rows(rng, (3, 8), "float32")
    _, mean, rstd = onlinenorm.layer_norm(x, return_stats=True)
    with pytest.raises(ValueError, match="rstd: has 2 elements, needs 3"):
        onlinenorm.layer_norm_backward(x, dy, mean, rstd[:2])
    with pytest.raises(TypeError, match="rstd: must be float32"):
        onlinenorm.rms_norm_backward(x, dy, rstd.astype(np.float64))
    with pytest.raises(ValueError, match="onorm_norm_backward"):
        onlinenorm.layer_norm_backward(x, random_rows(rng, (3, 9), "float32"), mean, rstd)
