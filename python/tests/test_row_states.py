"""Partial row states on numpy arrays: each slice's state, merged, finishing each slice, against
the float64 reference of the whole rows (not against the library's single call)."""
import numpy as np
import pytest

import onlinenorm
import reference as ref
from conftest import NUMPY_DTYPES, poisoned, random_rows

SPLITS = [[5], [1, 4], [100, 1, 28], [0, 64, 0, 63]]  # slice widths of one row


def slices(x, widths):
    edges = np.cumsum([0] + widths)
    return [x[..., a:b] for a, b in zip(edges[:-1], edges[1:])]


def test_states_are_the_rows_own(rng):
    x = random_rows(rng, (2, 3, 77), "float32")
    s = onlinenorm.softmax_stats(x)
    assert s.shape == (2, 3, 2) and s.dtype == np.float32
    xd = x.astype(np.float64)
    assert (s[..., 0] == x.max(-1)).all()
    want = np.exp(xd - xd.max(-1, keepdims=True)).sum(-1)
    ref.assert_within(s[..., 1], want, 1e-5 * want, "float32", "sum_exp")
    m = onlinenorm.moments_stats(x)
    assert m.shape == (2, 3) and m.dtype == onlinenorm.MOMENTS_STATE
    count, mean, m2 = ref.moments(xd)
    assert (m["count"] == count).all()
    # float32 sums where they are trusted (docs/API.md): float accuracy, kept in double
    ref.assert_within(m["mean"], mean, 1e-6 * (np.abs(mean) + np.sqrt(m2 / count)), "float64", "mean")
    ref.assert_within(m["m2"], m2, 1e-5 * m2, "float64", "m2")


def test_empty_slices_give_the_identity():
    s = onlinenorm.softmax_stats(np.zeros((3, 0), np.float32))
    assert np.isneginf(s[:, 0]).all() and (s[:, 1] == 0).all()
    m = onlinenorm.moments_stats(np.zeros((3, 0), np.float32))
    assert (m["count"] == 0).all() and (m["mean"] == 0).all() and (m["m2"] == 0).all()


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("widths", SPLITS)
@pytest.mark.parametrize("log", [False, True])
def test_softmax_composed_matches_the_whole_rows(rng, dtype, widths, log):
    x = random_rows(rng, (4, sum(widths)), dtype)
    parts = slices(x, widths)
    state = onlinenorm.softmax_merge([onlinenorm.softmax_stats(p) for p in parts])
    y = np.concatenate([onlinenorm.softmax_finish(p, state, log) for p in parts], axis=-1)
    if log:
        want = ref.log_softmax(x)
        ref.assert_within(y, want, 2e-5 + 1e-6 * np.abs(want), dtype, "log_softmax")
    else:
        want = ref.softmax(x)
        ref.assert_within(y, want, 1e-5 * want + 1e-30, dtype, "softmax")


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("widths", SPLITS)
@pytest.mark.parametrize("kind", ["layer_norm", "rms_norm"])
def test_norms_composed_match_the_whole_rows(rng, dtype, widths, kind):
    cols = sum(widths)
    x = random_rows(rng, (3, cols), dtype) + np.asarray(1.5, dtype)
    gamma = random_rows(rng, (cols,), dtype)
    beta = random_rows(rng, (cols,), dtype) if kind == "layer_norm" else None
    parts = slices(x, widths)
    state = onlinenorm.moments_merge([onlinenorm.moments_stats(p) for p in parts])
    results = [
        onlinenorm.norm_finish(p, state, kind, g, None if beta is None else b, 1e-5)
        for p, g, b in zip(parts, slices(gamma, widths), slices(gamma if beta is None else beta, widths))
    ]
    y = np.concatenate([r.y for r in results], axis=-1)
    xd, gd = x.astype(np.float64), gamma.astype(np.float64)
    if kind == "layer_norm":
        want, mean, rstd = ref.layer_norm(xd, gd, beta.astype(np.float64), 1e-5)
        bound = 1e-5 * np.abs(want) + 1e-6 + 2.0**-20 * np.abs(mean)[..., None] * rstd[..., None] * np.abs(gd)
        ref.assert_within(results[-1].mean, mean, 1e-6 * np.abs(mean) + 1e-6, "float32", "mean")
    else:
        want, rstd = ref.rms_norm(xd, gd, 1e-5)
        bound = 1e-5 * np.abs(want) + 1e-6
    ref.assert_within(y, want, bound, dtype, kind)
    ref.assert_within(results[-1].rstd, rstd, 1e-5 * rstd, "float32", "rstd")


def test_merge_takes_a_stacked_array_and_keeps_offset_data_exact_enough(rng):
    x = (1e6 + rng.standard_normal((2, 4000))).astype(np.float32)
    parts = slices(x, [1000] * 4)
    stacked = np.stack([onlinenorm.moments_stats(p) for p in parts])
    merged = onlinenorm.moments_merge(stacked)
    count, mean, m2 = ref.moments(x)
    assert (merged["count"] == count).all()
    ref.assert_within(merged["m2"], m2, 1e-6 * m2, "float64", "m2 of offset data")
    s = onlinenorm.softmax_merge(np.stack([onlinenorm.softmax_stats(p) for p in parts]))
    assert (s[:, 0] == x.max(-1)).all()


def test_bad_states_raise_and_write_nothing(rng):
    x = random_rows(rng, (3, 8), "float32")
    out = poisoned(x.shape, "float32")
    state = onlinenorm.softmax_stats(x)
    with pytest.raises(ValueError, match="state: has 4 elements, needs 6"):
        onlinenorm.softmax_finish(x, state[:2], out=out)
    with pytest.raises(TypeError, match="float32"):
        onlinenorm.softmax_finish(x, state.astype(np.float64), out=out)
    moments = onlinenorm.moments_stats(x)
    with pytest.raises(TypeError, match="MOMENTS_STATE"):
        onlinenorm.norm_finish(x, moments.astype([("count", "<i4"), ("mean", "<f8"), ("m2", "<f8")]), out=out)
    with pytest.raises(ValueError, match="onorm_norm_finish"):
        onlinenorm.norm_finish(x, moments, "rms_norm", beta=np.ones(8, np.float32), out=out)
    with pytest.raises(ValueError, match="kind"):
        onlinenorm.norm_finish(x, moments, "batch_norm", out=out)
    assert np.isnan(out).all()
    with pytest.raises(ValueError, match="different shapes"):
        onlinenorm.softmax_merge([state, state[:2]])
    with pytest.raises(ValueError, match="at least one"):
        onlinenorm.moments_merge([])
