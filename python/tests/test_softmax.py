"""softmax, log_softmax and their backward passes on numpy arrays against the float64 reference."""
import numpy as np
import pytest

import onlinenorm
import reference as ref
from conftest import NUMPY_DTYPES, WIDTHS, poisoned, random_rows

SHAPES = [(), (5,), (2, 3)]  # leading axes, flattened into rows


def softmax_bound(r):
    return 1e-5 * np.abs(r) + 1e-30


def log_softmax_bound(r):
    return 2e-5 + 1e-6 * np.abs(r)


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("cols", WIDTHS)
@pytest.mark.parametrize("lead", SHAPES)
def test_softmax_and_log_softmax_match_reference(rng, dtype, cols, lead):
    x = random_rows(rng, lead + (cols,), dtype)
    y = onlinenorm.softmax(x)
    assert type(y) is np.ndarray and y.dtype == x.dtype and y.shape == x.shape
    ref.assert_within(y, ref.softmax(x), softmax_bound(ref.softmax(x)), dtype, "softmax")
    ly = onlinenorm.log_softmax(x)
    ref.assert_within(ly, ref.log_softmax(x), log_softmax_bound(ref.log_softmax(x)), dtype, "log_softmax")


@pytest.mark.parametrize("out_dtype", NUMPY_DTYPES)
def test_out_is_written_fully_and_returned(rng, out_dtype):
    x = random_rows(rng, (4, 127), "float32")
    out = poisoned(x.shape, out_dtype)
    y = onlinenorm.softmax(x, out=out)
    assert y is out
    ref.assert_within(out, ref.softmax(x), softmax_bound(ref.softmax(x)), out_dtype, "softmax out=")


def test_out_dtype_converts_on_store(rng):
    x = random_rows(rng, (3, 33), "float64")
    y = onlinenorm.log_softmax(x, out_dtype=np.float16)
    assert y.dtype == np.float16
    ref.assert_within(y, ref.log_softmax(x), log_softmax_bound(ref.log_softmax(x)), "float16", "log_softmax f16")


def test_rows_with_a_row_stride_are_taken_in_place(rng):
    wide = random_rows(rng, (6, 200), "float32")
    x = wide[:, 10:137]  # row stride 200, 127 columns
    out_wide = poisoned((6, 300), "float32")
    out = out_wide[:, :127]
    onlinenorm.softmax(x, out=out)
    ref.assert_within(out, ref.softmax(x), softmax_bound(ref.softmax(x)), "float32", "strided softmax")
    assert np.isnan(out_wide[:, 127:]).all(), "wrote outside the rows"


def test_leading_axes_of_one_row_stride_are_flattened(rng):
    base = random_rows(rng, (2, 3, 32), "float32")
    for x in (base[..., :16], base[:, 1:2, :]):  # row strides 32 and 96 (the size-1 axis aside)
        y = onlinenorm.softmax(x)
        ref.assert_within(y, ref.softmax(x), softmax_bound(ref.softmax(x)), "float32", "sliced batch")


def test_strides_the_rows_cannot_express_raise_value_error(rng):
    x = random_rows(rng, (4, 8), "float32")
    with pytest.raises(ValueError, match="last axis must be contiguous"):
        onlinenorm.softmax(x[:, ::2])
    with pytest.raises(ValueError, match="last axis must be contiguous"):
        onlinenorm.softmax(x.T)
    y = random_rows(rng, (4, 3, 8), "float32")
    with pytest.raises(ValueError, match="do not flatten into rows"):
        onlinenorm.softmax(y[:, :2, :])
    with pytest.raises(ValueError, match="do not flatten into rows"):
        onlinenorm.softmax(y[::2])


def test_the_library_rejects_overlapping_rows_with_its_message(rng):
    row = random_rows(rng, (8,), "float32")
    x = np.broadcast_to(row, (4, 8))  # row stride 0
    with pytest.raises(ValueError, match="onorm_softmax: .*row_stride"):
        onlinenorm.softmax(x)


def test_bad_arguments_raise_and_leave_out_untouched(rng):
    x = random_rows(rng, (3, 8), "float32")
    out = poisoned((3, 7), "float32")
    with pytest.raises(ValueError, match="shape"):
        onlinenorm.softmax(x, out=out)
    assert np.isnan(out).all()
    with pytest.raises(TypeError, match="none of float32"):
        onlinenorm.softmax(x.astype(np.int32))
    with pytest.raises(TypeError, match="not an array"):
        onlinenorm.softmax([[1.0, 2.0]])
    with pytest.raises(ValueError, match="at least one axis"):
        onlinenorm.softmax(np.array(1.0, np.float32))
    with pytest.raises(TypeError, match="out_dtype"):
        onlinenorm.softmax(x, out_dtype="complex64")
    with pytest.raises(TypeError, match="out_dtype asks for float16"):
        onlinenorm.softmax(x, out=poisoned(x.shape, "float32"), out_dtype="float16")
    readonly = poisoned(x.shape, "float32")
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="out: is read-only"):
        onlinenorm.softmax(x, out=readonly)
    assert np.isnan(readonly).all()


def test_read_only_inputs_and_in_place_outputs(rng):
    x = random_rows(rng, (3, 40), "float32")
    expected = ref.softmax(x)
    x.flags.writeable = False
    ref.assert_within(onlinenorm.softmax(x), expected, softmax_bound(expected), "float32", "read-only x")
    x = x.copy()
    assert onlinenorm.softmax(x, out=x) is x
    ref.assert_within(x, expected, softmax_bound(expected), "float32", "in place")


def test_empty_rows_are_fine():
    assert onlinenorm.softmax(np.zeros((0, 5), np.float32)).shape == (0, 5)
    assert onlinenorm.log_softmax(np.zeros((3, 0), np.float32)).shape == (3, 0)


def test_special_values_follow_the_contract():
    x = np.array([[-np.inf] * 4, [0.0, np.nan, 1.0, 2.0]], np.float32)
    y = onlinenorm.softmax(x)
    assert (y[0] == 0).all() and np.isnan(y[1]).all()
    assert np.isneginf(onlinenorm.log_softmax(x)[0]).all()


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("cols", WIDTHS)
def test_backward_passes_match_reference(rng, dtype, cols):
    x = random_rows(rng, (2, 3, cols), "float64")
    dy = random_rows(rng, (2, 3, cols), dtype)
    y = ref.softmax(x).astype(dtype)
    yd, dyd = y.astype(np.float64), dy.astype(np.float64)
    r = ref.softmax_backward(yd, dyd)
    bound = 1e-5 * np.abs(yd) * (np.abs(dyd) + np.abs(yd * dyd).sum(-1, keepdims=True)) + 1e-30
    out = poisoned(x.shape, dtype)
    assert onlinenorm.softmax_backward(y, dy, out=out) is out
    ref.assert_within(out, r, bound, dtype, "softmax_backward")

    ly = ref.log_softmax(x).astype(dtype)
    lyd = ly.astype(np.float64)
    r = ref.log_softmax_backward(lyd, dyd)
    bound = 1e-5 * (np.abs(dyd) + np.exp(lyd) * np.abs(dyd).sum(-1, keepdims=True)) + 1e-30
    dx = onlinenorm.log_softmax_backward(ly, dy)
    assert dx.dtype == dy.dtype
    ref.assert_within(dx, r, bound, dtype, "log_softmax_backward")


def test_backward_rejects_mismatched_shapes(rng):
    y = random_rows(rng, (3, 8), "float32")
    with pytest.raises(ValueError, match="onorm_softmax_backward"):
        onlinenorm.softmax_backward(y, random_rows(rng, (3, 9), "float32"), out=poisoned((3, 9), "float32"))


class DLPackOnly:
    """An array of another framework: only the DLPack protocol and a shape."""

    def __init__(self, a):
        self._a, self.shape = a, a.shape

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_any_dlpack_object_is_taken_and_gets_a_numpy_output(rng):
    x = random_rows(rng, (3, 20), "float32")
    y = onlinenorm.softmax(DLPackOnly(x))
    assert type(y) is np.ndarray and y.dtype == np.float32
    ref.assert_within(y, ref.softmax(x), softmax_bound(ref.softmax(x)), "float32", "DLPack object")
    out = poisoned(x.shape, "float32")
    onlinenorm.log_softmax(DLPackOnly(x), out=DLPackOnly(out))
    ref.assert_within(out, ref.log_softmax(x), log_softmax_bound(ref.log_softmax(x)), "float32", "DLPack out")
