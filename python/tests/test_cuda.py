"""CUDA tensors through the package on a GPU: the ops against float64, outputs on the input's
device, torch's current stream, autograd, torch.compile, bad input. Skipped without torch, a CUDA
device or the library's CUDA backend (CI has none: these run on the GPU machine)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
ot = pytest.importorskip("onlinenorm.torch")

import onlinenorm  # noqa: E402
import reference as ref  # noqa: E402

if not torch.cuda.is_available() or onlinenorm.info()["backends"]["cuda"]["devices"] == 0:
    pytest.skip("no CUDA device, or the library has no CUDA backend here", allow_module_level=True)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
WIDTHS = [1, 3, 127, 1025, 65537]


def name(dtype):
    return str(dtype).replace("torch.", "")


@pytest.fixture
def gen():
    return torch.Generator(device="cuda").manual_seed(7)


def poisoned(shape, dtype):
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", WIDTHS)
def test_forward_ops_on_cuda_tensors(gen, dtype, cols):
    x = (torch.randn(2, 3, cols, device="cuda", generator=gen) * 3).to(dtype)
    xd = ref.as_float64(x)
    y = onlinenorm.softmax(x)
    assert y.device == x.device and y.dtype == dtype and y.shape == x.shape
    r = ref.softmax(xd)
    ref.assert_within(ref.as_float64(y), r, 1e-5 * r + 1e-30, name(dtype), "softmax")
    out = poisoned(x.shape, torch.float32)
    assert onlinenorm.log_softmax(x, out=out) is out
    r = ref.log_softmax(xd)
    ref.assert_within(ref.as_float64(out), r, 1e-5 * (np.abs(r) + 1.0), "float32", "log_softmax")
    g = torch.rand(cols, device="cuda", generator=gen).to(dtype) + 0.5
    b = torch.randn(cols, device="cuda", generator=gen).to(dtype)
    out = poisoned(x.shape, torch.float32)
    y, mean, rstd = onlinenorm.layer_norm(x, g, b, 1e-5, out=out, return_stats=True)
    assert mean.device == x.device and mean.dtype == torch.float32
    r, rm, rr = ref.layer_norm(xd, ref.as_float64(g), ref.as_float64(b), 1e-5)
    bound = 1e-5 * np.abs(r) + 1e-5 + 2.0**-20 * np.abs(rm)[..., None] * rr[..., None]
    ref.assert_within(ref.as_float64(out), r, bound, "float32", "layer_norm")
    out = poisoned(x.shape, torch.float32)
    onlinenorm.rms_norm(x, g, 1e-6, out=out)
    r, _ = ref.rms_norm(xd, ref.as_float64(g), 1e-6)
    ref.assert_within(ref.as_float64(out), r, 1e-5 * np.abs(r) + 1e-6, "float32", "rms_norm")


@pytest.mark.parametrize("dtype", DTYPES)
def test_backward_passes_on_cuda_tensors(gen, dtype):
    x = torch.randn(64, 1000, device="cuda", generator=gen).to(dtype)
    dy = torch.randn(64, 1000, device="cuda", generator=gen).to(dtype)
    g = (torch.rand(1000, device="cuda", generator=gen) + 0.5).to(dtype)
    _, mean, rstd = onlinenorm.layer_norm(x, g, None, 1e-5, return_stats=True)
    dx, dgamma, dbeta = onlinenorm.layer_norm_backward(x, dy, mean, rstd, g, out_dtype="float32")
    xd, dyd, gd = ref.as_float64(x), ref.as_float64(dy), ref.as_float64(g)
    rdx, rdg, rdb = ref.norm_backward(xd, dyd, gd, ref.as_float64(mean), ref.as_float64(rstd))
    assert dx.device == x.device and dgamma.device == x.device
    np.testing.assert_allclose(ref.as_float64(dx), rdx, rtol=1e-4, atol=1e-4 * np.abs(rdx).max())
    np.testing.assert_allclose(ref.as_float64(dgamma), rdg, rtol=1e-4, atol=1e-4 * np.abs(rdg).max())
    np.testing.assert_allclose(ref.as_float64(dbeta), rdb, rtol=1e-4, atol=1e-4 * np.abs(rdb).max())
    y = onlinenorm.softmax(x, out_dtype="float32")
    dxs = onlinenorm.softmax_backward(y, dy.float())
    rs = ref.softmax_backward(ref.as_float64(y), dyd)
    np.testing.assert_allclose(ref.as_float64(dxs), rs, rtol=1e-4, atol=1e-5 * np.abs(rs).max())


def test_quantized_output_on_cuda(gen):
    x = torch.randn(16, 4096, device="cuda", generator=gen, dtype=torch.bfloat16)
    r = onlinenorm.norm(x, "rms_norm", out_dtype=torch.float8_e4m3fn)
    assert r.y.dtype == torch.float8_e4m3fn and r.y.device == x.device and r.y_scale.device == x.device
    v, _ = ref.rms_norm(ref.as_float64(x), 1.0, 1e-6)
    deq = ref.as_float64(r.y) * ref.as_float64(r.y_scale)[:, None]
    assert (np.abs(deq - v) <= 0.13 * np.abs(v) + 1e-3 * np.abs(v).max()).all()


def test_the_current_stream_is_followed(gen):
    """x is written on a side stream behind a long sleep; the call on that stream must see it.
    On any other stream it would read the old x (ones) while the sleep runs."""
    x = torch.ones(256, 4096, device="cuda")
    fresh = torch.randn(256, 4096, device="cuda", generator=gen)
    y = torch.empty_like(x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU clocks
        x.copy_(fresh)
        onlinenorm.softmax(x, out=y)
    side.synchronize()
    torch.testing.assert_close(y, torch.softmax(fresh, -1), rtol=1e-5, atol=1e-7)


def test_autograd_matches_torch_on_cuda(gen):
    x = torch.randn(8, 5, 384, device="cuda", generator=gen, requires_grad=True)
    res = torch.randn(8, 5, 384, device="cuda", generator=gen, requires_grad=True)
    w = torch.randn(384, device="cuda", generator=gen, requires_grad=True)
    b = torch.randn(384, device="cuda", generator=gen, requires_grad=True)
    dy = torch.randn(8, 5, 384, device="cuda", generator=gen)
    y, h = ot.layer_norm(x, w, b, residual=res)
    grads = torch.autograd.grad(y, (x, res, w, b), dy)
    want_y = torch.nn.functional.layer_norm(x + res, (384,), w, b, 1e-5)
    want = torch.autograd.grad(want_y, (x, res, w, b), dy)
    torch.testing.assert_close(y, want_y, rtol=1e-5, atol=1e-5)
    for got, expected in zip(grads, want):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    xs = torch.randn(4, 1000, device="cuda", generator=gen, requires_grad=True)
    (gs,) = torch.autograd.grad(ot.softmax(xs), xs, dy.reshape(-1)[:4000].reshape(4, 1000))
    (want_gs,) = torch.autograd.grad(torch.softmax(xs, -1), xs, dy.reshape(-1)[:4000].reshape(4, 1000))
    torch.testing.assert_close(gs, want_gs, rtol=1e-4, atol=1e-6)


def test_torch_compile_fullgraph_on_cuda(gen):
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), ot.RMSNorm(64, weight_offset=1.0),
                                torch.nn.Linear(64, 64), ot.LayerNorm(64)).cuda()

    def step(x):
        return ot.log_softmax(model(x)).exp().pow(2).sum()

    compiled = torch.compile(step, fullgraph=True)
    x = torch.randn(16, 64, device="cuda", generator=gen, requires_grad=True)
    loss = compiled(x)
    loss.backward()
    got = x.grad.clone()
    x.grad = None
    expected = step(x)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(got, x.grad)


def test_bad_input_on_cuda_raises_and_writes_nothing(gen):
    x = torch.randn(4, 64, device="cuda", generator=gen)
    out = poisoned((4, 64), torch.float32)
    with pytest.raises((ValueError, TypeError)):
        onlinenorm.softmax(x, out=torch.empty(4, 64))  # output on the CPU, input on the GPU
    with pytest.raises((ValueError, TypeError)):
        onlinenorm.softmax(x, out=out[:, :32])  # shape unlike x's
    with pytest.raises((ValueError, TypeError)):
        onlinenorm.softmax(x, context=onlinenorm.Context("cpu"))  # a CPU context for GPU memory
    with pytest.raises((ValueError, TypeError)):
        onlinenorm.layer_norm(x, torch.ones(63, device="cuda"))  # gamma of the wrong length
    assert torch.isnan(out).all()
