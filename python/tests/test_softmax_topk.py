"""softmax_topk on numpy arrays against the float64 reference: values, indices, ties,
renormalize, special rows, bad arguments."""
import numpy as np
import pytest

import onlinenorm
import reference as ref
from conftest import NUMPY_DTYPES, poisoned, random_rows


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("cols, k", [(1, 1), (8, 2), (127, 8), (1025, 64), (300, 300)])
@pytest.mark.parametrize("renormalize", [False, True])
def test_values_and_indices_match_reference(rng, dtype, cols, k, renormalize):
    x = random_rows(rng, (2, 3, cols), dtype)
    values, indices = onlinenorm.softmax_topk(x, k, renormalize)
    assert values.shape == indices.shape == (2, 3, k) and values.dtype == x.dtype and indices.dtype == np.int64
    want_values, want_indices = ref.topk(x, k, renormalize)
    np.testing.assert_array_equal(indices, want_indices)
    ref.assert_within(values, want_values, 1e-5 * want_values + 1e-30, dtype, "values")


def test_ties_take_the_lower_column_first():
    x = np.array([[1.0, 3.0, 3.0, 0.0, 3.0], [-0.0, 0.0, -1.0, 0.0, -0.0]], np.float32)
    _, indices = onlinenorm.softmax_topk(x, 3)
    np.testing.assert_array_equal(indices, [[1, 2, 4], [0, 1, 3]])


def test_values_into_out_of_another_dtype(rng):
    x = random_rows(rng, (4, 50), "float32")
    out = poisoned((4, 5), "float64")
    values, _ = onlinenorm.softmax_topk(x, 5, out=out)
    assert values is out
    want, _ = ref.topk(x, 5)
    ref.assert_within(out, want, 1e-5 * want + 1e-30, "float64", "values")


def test_special_rows():
    x = np.array([[-np.inf] * 4, [0.0, np.nan, 1.0, 2.0]], np.float32)
    values, indices = onlinenorm.softmax_topk(x, 2)
    assert (values[0] == 0).all() and list(indices[0]) == [0, 1]
    assert np.isnan(values[1]).all() and len(set(indices[1])) == 2 and ((0 <= indices[1]) & (indices[1] < 4)).all()


def test_bad_k_raises(rng):
    x = random_rows(rng, (2, 6), "float32")
    for k in (0, -1, 7):
        with pytest.raises(ValueError, match="k: "):
            onlinenorm.softmax_topk(x, k)
    with pytest.raises(TypeError):
        onlinenorm.softmax_topk(x, 2.5)
    out = poisoned((2, 3), "float32")
    with pytest.raises(ValueError, match="out: has shape"):
        onlinenorm.softmax_topk(x, 2, out=out)
    assert np.isnan(out).all()
