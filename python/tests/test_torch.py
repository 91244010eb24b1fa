"""onlinenorm.torch (custom ops, autograd, modules, torch.compile) and torch tensors through the
plain API (bfloat16 included). Skipped where torch is not installed (CI installs no torch)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
ot = pytest.importorskip("onlinenorm.torch")

import onlinenorm  # noqa: E402
import reference as ref  # noqa: E402
from conftest import WIDTHS  # noqa: E402

TORCH_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(99)


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("cols", WIDTHS)
def test_torch_tensors_through_the_plain_api(gen, dtype, cols):
    x = (torch.randn(2, 3, cols, generator=gen) * 3).to(dtype)
    xd = ref.as_float64(x)
    y = onlinenorm.softmax(x)
    assert isinstance(y, torch.Tensor) and y.dtype == dtype
    r = ref.softmax(xd)
    ref.assert_within(ref.as_float64(y), r, 1e-5 * r + 1e-30, dtype_name(dtype), "softmax")
    out = torch.full(x.shape, float("nan"), dtype=torch.float32)
    y, mean, rstd = onlinenorm.layer_norm(x, out=out, return_stats=True)
    assert y is out and mean.dtype == torch.float32
    r, rm, rr = ref.layer_norm(xd, 1.0, 0.0, 1e-5)
    bound = 1e-5 * np.abs(r) + 1e-6 + 2.0**-20 * np.abs(rm)[..., None] * rr[..., None]
    ref.assert_within(ref.as_float64(out), r, bound, "float32", "layer_norm")


def test_plain_api_detaches_tensors_that_require_grad(gen):
    x = torch.randn(2, 5, generator=gen, requires_grad=True)
    y = onlinenorm.rms_norm(x)
    assert not y.requires_grad


def test_torch_float8_output(gen):
    x = torch.randn(4, 32, generator=gen)
    result = onlinenorm.norm(x, "rms_norm", out_dtype=torch.float8_e4m3fn)
    assert result.y.dtype == torch.float8_e4m3fn
    v, _ = ref.rms_norm(ref.as_float64(x), 1.0, 1e-6)
    deq = ref.as_float64(result.y) * ref.as_float64(result.y_scale)[:, None]
    assert (np.abs(deq - v) <= 0.13 * np.abs(v) + 1e-3 * np.abs(v).max()).all()


def test_ops_match_torchs_own_functions(gen):
    x = torch.randn(8, 300, generator=gen)
    w, b = torch.randn(300, generator=gen), torch.randn(300, generator=gen)
    torch.testing.assert_close(ot.softmax(x), torch.softmax(x, -1))
    torch.testing.assert_close(ot.log_softmax(x), torch.log_softmax(x, -1))
    torch.testing.assert_close(ot.layer_norm(x, w, b), torch.nn.functional.layer_norm(x, (300,), w, b, 1e-5))
    expected = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(ot.rms_norm(x, w), expected)


def test_gradcheck_float64_softmax():
    x = torch.randn(3, 17, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ot.softmax, (x,))
    assert torch.autograd.gradcheck(ot.log_softmax, (x,))


def test_gradcheck_float64_layer_norm():
    x = torch.randn(2, 3, 11, dtype=torch.float64, requires_grad=True)
    w = torch.randn(11, dtype=torch.float64, requires_grad=True)
    b = torch.randn(11, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w, b: ot.layer_norm(x, w, b), (x, w, b))


def test_gradcheck_float64_rms_norm_with_residual_and_weight_offset():
    x = torch.randn(4, 13, dtype=torch.float64, requires_grad=True)
    r = torch.randn(4, 13, dtype=torch.float64, requires_grad=True)
    w = torch.randn(13, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, r, w: ot.rms_norm(x, w, residual=r, weight_offset=1.0), (x, r, w))
    assert torch.autograd.gradcheck(lambda x, r: ot.layer_norm(x, residual=r), (x, r))


def test_opcheck_of_the_custom_ops(gen):
    x = torch.randn(3, 9, generator=gen, requires_grad=True)
    w = torch.randn(9, generator=gen, requires_grad=True)
    b = torch.randn(9, generator=gen, requires_grad=True)
    r = torch.randn(3, 9, generator=gen, requires_grad=True)
    torch.library.opcheck(torch.ops.onlinenorm.softmax.default, (x, True))
    torch.library.opcheck(torch.ops.onlinenorm.norm.default, (x, r, w, b, 0, 1e-5, 0.0))
    torch.library.opcheck(torch.ops.onlinenorm.norm.default, (x, None, w, None, 1, 1e-6, 1.0))


def test_modules_with_residual_and_gradients(gen):
    norm = ot.RMSNorm(16, weight_offset=1.0)
    assert torch.equal(norm.weight, torch.zeros(16))  # scale 1 + 0
    x = torch.randn(2, 5, 16, generator=gen, requires_grad=True)
    residual = torch.randn(2, 5, 16, generator=gen)
    y, h = norm(x, residual)
    torch.testing.assert_close(h, x + residual)
    y.sum().backward()
    assert x.grad is not None and norm.weight.grad is not None
    ln = ot.LayerNorm(16)
    reference = torch.nn.LayerNorm(16)
    torch.testing.assert_close(ln(x), reference(x))
    with pytest.raises(ValueError, match="last axis"):
        ot.LayerNorm((4, 16))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph_forward_and_backward(gen, backend):
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), ot.LayerNorm(32), torch.nn.Linear(32, 32), ot.RMSNorm(32))

    def step(x):
        return ot.softmax(model(x)).pow(2).sum()

    compiled = torch.compile(step, fullgraph=True, backend=backend)
    x = torch.randn(4, 32, generator=gen, requires_grad=True)
    loss = compiled(x)
    loss.backward()
    expected_grad = x.grad.clone()
    x.grad = None
    step(x).backward()
    torch.testing.assert_close(loss, step(x))
    torch.testing.assert_close(expected_grad, x.grad)
