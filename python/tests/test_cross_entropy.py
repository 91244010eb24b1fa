"""cross_entropy on numpy arrays against the float64 reference: loss, lse, the gradient of the
same pass (new, given, in place), ignore_index, label smoothing, z-loss, bad arguments."""
import numpy as np
import pytest

import onlinenorm
import reference as ref
from conftest import NUMPY_DTYPES, WIDTHS, poisoned, random_rows


def random_targets(rng, shape, cols, ignore_every=0):
    t = rng.integers(0, cols, size=shape).astype(np.int64)
    if ignore_every:
        t.reshape(-1)[::ignore_every] = -100
    return t


def check_all(x, t, result, dtype, **options):
    loss, lse, grad, bound = ref.cross_entropy(x.astype(np.float64), t, **options)
    stat = ref.cross_entropy_stat_bound(loss, lse)
    ref.assert_within(result.loss, loss, np.where(loss == 0, 0.0, stat), "float32", "loss")
    if result.lse is not None:
        ref.assert_within(result.lse, lse, stat, "float32", "lse")
    if result.grad is not None:
        ref.assert_within(result.grad, grad, bound, dtype, "grad")


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("cols", WIDTHS)
def test_loss_lse_and_gradient_match_reference(rng, dtype, cols):
    x = random_rows(rng, (2, 3, cols), dtype)
    t = random_targets(rng, (2, 3), cols, ignore_every=4)
    r = onlinenorm.cross_entropy(x, t, return_lse=True, grad=True)
    assert r.loss.shape == r.lse.shape == (2, 3) and r.loss.dtype == np.float32
    assert r.grad.shape == x.shape and r.grad.dtype == x.dtype
    check_all(x, t, r, dtype)
    assert (r.loss.reshape(-1)[::4] == 0).all() and (r.grad.reshape(-1, cols)[::4] == 0).all()


def test_loss_alone_is_an_array(rng):
    x = random_rows(rng, (5, 40), "float32")
    t = random_targets(rng, (5,), 40)
    loss = onlinenorm.cross_entropy(x, t)
    assert type(loss) is np.ndarray and loss.shape == (5,)
    ref.assert_within(loss, ref.cross_entropy(x, t)[0], ref.cross_entropy_stat_bound(*ref.cross_entropy(x, t)[:2]),
                      "float32", "loss")


@pytest.mark.parametrize("label_smoothing, z_loss, grad_scale", [(0.1, 0.0, 1.0), (0.0, 1e-4, 0.25), (1.0, 0.5, -2.0)])
def test_smoothing_z_loss_and_grad_scale(rng, label_smoothing, z_loss, grad_scale):
    x = random_rows(rng, (7, 1000), "float32")
    t = random_targets(rng, (7,), 1000, ignore_every=3)
    options = dict(label_smoothing=label_smoothing, z_loss=z_loss, grad_scale=grad_scale)
    r = onlinenorm.cross_entropy(x, t, return_lse=True, grad=True, **options)
    check_all(x, t, r, "float32", **options)


def test_another_ignore_index(rng):
    x = random_rows(rng, (4, 9), "float32")
    t = np.array([3, 0, 0, 8], np.int64)
    r = onlinenorm.cross_entropy(x, t, ignore_index=0, grad=True)
    check_all(x, t, r, "float32", ignore_index=0)
    assert r.loss[1] == r.loss[2] == 0 and (r.grad[1:3] == 0).all()


@pytest.mark.parametrize("grad_dtype", NUMPY_DTYPES)
def test_gradient_into_a_given_array_or_in_place(rng, grad_dtype):
    x = random_rows(rng, (3, 130), "float32")
    t = random_targets(rng, (3,), 130)
    out = poisoned(x.shape, grad_dtype)
    r = onlinenorm.cross_entropy(x, t, grad=out)
    assert r.grad is out
    check_all(x, t, r, grad_dtype)
    logits = x.copy()
    r = onlinenorm.cross_entropy(logits, t, in_place=True, return_lse=True)
    assert r.grad is logits
    check_all(x, t, r, "float32")


def test_targets_out_of_range_give_that_row_nan(rng):
    x = random_rows(rng, (3, 6), "float32")
    t = np.array([1, 6, -1], np.int64)
    r = onlinenorm.cross_entropy(x, t, grad=True)
    assert np.isfinite(r.loss[0]) and np.isnan(r.loss[1:]).all() and np.isnan(r.grad[1:]).all()


def test_bad_arguments_raise_and_write_nothing(rng):
    x = random_rows(rng, (3, 8), "float32")
    t = random_targets(rng, (3,), 8)
    out = poisoned(x.shape, "float32")
    with pytest.raises(ValueError, match="targets: has shape"):
        onlinenorm.cross_entropy(x, t[:2], grad=out)
    with pytest.raises(TypeError, match="targets: has dtype int32"):
        onlinenorm.cross_entropy(x, t.astype(np.int32), grad=out)
    with pytest.raises(ValueError, match="onorm_cross_entropy: .*"):
        onlinenorm.cross_entropy(x, t, label_smoothing=1.5, grad=out)
    with pytest.raises(ValueError, match="onorm_cross_entropy: .*"):
        onlinenorm.cross_entropy(x, t, z_loss=-1.0, grad=out)
    with pytest.raises(ValueError, match="grad: has shape"):
        onlinenorm.cross_entropy(x, t, grad=poisoned((3, 7), "float32"))
    with pytest.raises(ValueError, match="in_place"):
        onlinenorm.cross_entropy(x, t, grad=out, in_place=True)
    assert np.isnan(out).all()
    readonly = x.copy()
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        onlinenorm.cross_entropy(readonly, t, in_place=True)
    assert (readonly == x).all()
