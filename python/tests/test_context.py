"""Backend choice, info(), and arrays refused by a context that cannot reach them."""
import numpy as np
import pytest

import onlinenorm


def test_info_describes_every_backend():
    info = onlinenorm.info()
    assert info["api_version"] == onlinenorm.API_VERSION == 2
    assert set(info["backends"]) == {"cpu", "cuda", "hip"}
    assert info["backends"]["cpu"] == {"devices": 1, "unavailable_reason": ""}
    for gpu in ("cuda", "hip"):
        entry = info["backends"][gpu]
        assert (entry["devices"] > 0) == (entry["unavailable_reason"] == "")
    assert info["cpu_targets"]


def test_cpu_context_computes_and_names_itself():
    ctx = onlinenorm.Context("cpu")
    assert ctx.backend == "cpu" and ctx.name.startswith("cpu") and ctx.device == 0
    ctx.set_stream(0)
    ctx.synchronize()
    y = onlinenorm.softmax(np.zeros((2, 4), np.float32), context=ctx)
    assert (y == 0.25).all()


def test_auto_context_is_a_real_backend():
    assert onlinenorm.Context("auto").backend in ("cpu", "cuda", "hip")


@pytest.mark.parametrize("gpu", ["cuda", "hip"])
def test_an_unavailable_gpu_backend_raises_with_the_reason(gpu):
    if onlinenorm.info()["backends"][gpu]["devices"] > 0:
        with pytest.raises(TypeError, match="cannot use"):  # host arrays on a GPU context
            onlinenorm.softmax(np.zeros((2, 4), np.float32), context=onlinenorm.Context(gpu))
    else:
        with pytest.raises(RuntimeError, match="onorm_create"):
            onlinenorm.Context(gpu)


def test_unknown_backend_is_a_value_error():
    with pytest.raises(ValueError, match="backend"):
        onlinenorm.Context("tpu")
