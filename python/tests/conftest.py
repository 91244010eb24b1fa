import numpy as np
import pytest

# numpy's dtypes that cross DLPack; bfloat16 is tested through torch (test_torch_arrays.py).
NUMPY_DTYPES = ["float32", "float16", "float64"]
WIDTHS = [1, 3, 127, 1025]


def random_rows(rng, shape, dtype_name, scale=3.0):
    """Random values rounded to the dtype (the reference starts from these rounded values)."""
    return (rng.standard_normal(shape) * scale).astype(dtype_name)


def poisoned(shape, dtype_name):
    """An output filled with NaN (int8: 0x55), so that any element left unwritten shows."""
    if dtype_name == "int8":
        return np.full(shape, 0x55, np.int8)
    return np.full(shape, np.nan, dtype_name)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
