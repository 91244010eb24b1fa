"""cross_entropy, softmax_topk and the partial row states on CUDA tensors against float64.
Skipped without torch, a CUDA device or the library's CUDA backend (runs on the GPU machine)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
ot = pytest.importorskip("onlinenorm.torch")

import onlinenorm  # noqa: E402
import reference as ref  # noqa: E402

if not torch.cuda.is_available() or onlinenorm.info()["backends"]["cuda"]["devices"] == 0:
    pytest.skip("no CUDA device, or the library has no CUDA backend here", allow_module_level=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("cols", [3, 1025, 65537])
def test_cross_entropy_and_topk_on_cuda(dtype, cols):
    gen = torch.Generator(device="cuda").manual_seed(3)
    x = (torch.randn(6, cols, device="cuda", generator=gen) * 3).to(dtype)
    t = torch.randint(0, cols, (6,), device="cuda", generator=gen)
    t[2] = -100
    r = onlinenorm.cross_entropy(x, t, return_lse=True, grad=True, z_loss=1e-4)
    assert r.loss.device == x.device and r.grad.dtype == dtype
    loss, lse, grad, bound = ref.cross_entropy(ref.as_float64(x), t.cpu().numpy(), z_loss=1e-4)
    stat = ref.cross_entropy_stat_bound(loss, lse)
    ref.assert_within(ref.as_float64(r.loss), loss, np.where(loss == 0, 0.0, stat), "float32", "loss")
    ref.assert_within(ref.as_float64(r.lse), lse, stat, "float32", "lse")
    ref.assert_within(ref.as_float64(r.grad), grad, bound, str(dtype).replace("torch.", ""), "grad")
    k = min(8, cols)
    values, indices = onlinenorm.softmax_topk(x, k)
    want_values, want_indices = ref.topk(ref.as_float64(x), k)
    np.testing.assert_array_equal(indices.cpu().numpy(), want_indices)
    ref.assert_within(ref.as_float64(values), want_values, 1e-5 * want_values + 1e-30,
                      str(dtype).replace("torch.", ""), "values")


def test_row_states_composed_on_cuda():
    x = torch.randn(4, 3000, device="cuda")
    parts = torch.split(x, [1000, 1, 1999], dim=-1)
    state = onlinenorm.softmax_merge([onlinenorm.softmax_stats(p) for p in parts])
    y = torch.cat([onlinenorm.softmax_finish(p, state) for p in parts], -1)
    want = ref.softmax(ref.as_float64(x))
    ref.assert_within(ref.as_float64(y), want, 1e-5 * want + 1e-30, "float32", "softmax")
    moments = onlinenorm.moments_merge([onlinenorm.moments_stats(p) for p in parts])
    assert moments.shape == (4, 3) and moments.dtype == torch.float64
    assert (moments.view(torch.int64)[:, 0] == 3000).all()
    y = torch.cat([onlinenorm.norm_finish(p, moments, "rms_norm").y for p in parts], -1)
    want, _ = ref.rms_norm(ref.as_float64(x), 1.0, 1e-6)
    ref.assert_within(ref.as_float64(y), want, 1e-5 * np.abs(want) + 1e-6, "float32", "rms_norm")


def test_torch_cross_entropy_autograd_on_cuda():
    x = torch.randn(64, 32000, device="cuda", requires_grad=True)
    t = torch.randint(0, 32000, (64,), device="cuda")
    t[::5] = -100
    got = ot.cross_entropy(x, t, label_smoothing=0.1)
    want = torch.nn.functional.cross_entropy(x, t, label_smoothing=0.1)
    torch.testing.assert_close(got, want)
    (g,) = torch.autograd.grad(got, x)
    (w,) = torch.autograd.grad(want, x)
    torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-7)
