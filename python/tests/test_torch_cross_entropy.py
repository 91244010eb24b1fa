"""onlinenorm.torch's cross_entropy and softmax_topk (custom ops, autograd, opcheck), and torch
tensors (bfloat16 included) through the plain cross_entropy and softmax_topk. Skipped where
torch is not installed (CI installs no torch: these run where it is)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
ot = pytest.importorskip("onlinenorm.torch")

import onlinenorm  # noqa: E402
import reference as ref  # noqa: E402

F = torch.nn.functional


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(5)


def targets_with_ignored(gen, rows, cols):
    t = torch.randint(0, cols, (rows,), generator=gen)
    t[::3] = -100
    return t


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_plain_cross_entropy_on_torch_tensors(gen, dtype):
    x = (torch.randn(9, 300, generator=gen) * 3).to(dtype)
    t = targets_with_ignored(gen, 9, 300)
    r = onlinenorm.cross_entropy(x, t, return_lse=True, grad=True, label_smoothing=0.1)
    assert r.loss.dtype == torch.float32 and r.grad.dtype == dtype
    loss, lse, grad, bound = ref.cross_entropy(ref.as_float64(x), t.numpy(), label_smoothing=0.1)
    stat = ref.cross_entropy_stat_bound(loss, lse)
    ref.assert_within(ref.as_float64(r.loss), loss, np.where(loss == 0, 0.0, stat), "float32", "loss")
    ref.assert_within(ref.as_float64(r.grad), grad, bound, str(dtype).replace("torch.", ""), "grad")
    values, indices = onlinenorm.softmax_topk(x, 4)
    want_values, want_indices = ref.topk(ref.as_float64(x), 4)
    assert values.dtype == dtype and indices.dtype == torch.int64
    np.testing.assert_array_equal(indices.numpy(), want_indices)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
def test_cross_entropy_matches_torch_with_gradients(gen, reduction, label_smoothing):
    x = torch.randn(12, 50, generator=gen, requires_grad=True)
    t = targets_with_ignored(gen, 12, 50)
    got = ot.cross_entropy(x, t, reduction=reduction, label_smoothing=label_smoothing)
    want = F.cross_entropy(x, t, reduction=reduction, label_smoothing=label_smoothing, ignore_index=-100)
    torch.testing.assert_close(got, want)
    dy = torch.randn(want.shape, generator=gen)
    (g,) = torch.autograd.grad(got, x, dy)
    (w,) = torch.autograd.grad(want, x, dy)
    torch.testing.assert_close(g, w)


def test_cross_entropy_without_grad_and_in_half_precision(gen):
    x = torch.randn(6, 40, generator=gen)
    t = torch.randint(0, 40, (6,), generator=gen)
    with torch.no_grad():
        torch.testing.assert_close(ot.cross_entropy(x, t), F.cross_entropy(x, t))
    xb = x.to(torch.bfloat16).requires_grad_()
    loss = ot.cross_entropy(xb, t)
    assert loss.dtype == torch.bfloat16
    loss.backward()
    assert xb.grad.dtype == torch.bfloat16
    torch.testing.assert_close(xb.grad.float(), torch.autograd.grad(F.cross_entropy(x.requires_grad_(), t), x)[0],
                               rtol=2e-2, atol=2e-3)


def test_cross_entropy_z_loss_gradient_against_torch_float64():
    # The loss is float32 (the C ABI's): a numerical gradcheck would see its rounding, so the
    # gradient is checked against torch's autograd of the same loss in float64 instead.
    x = torch.randn(4, 7, dtype=torch.float64, requires_grad=True)
    t = torch.tensor([1, -100, 6, 0])
    w = torch.randn(4, dtype=torch.float64)
    z = 0.1
    (ot.cross_entropy(x, t, reduction="none", z_loss=z).double() * w).sum().backward()
    ours = x.grad.clone()
    x.grad = None
    lse = torch.logsumexp(x, dim=-1)
    kept = t != -100
    ref = F.cross_entropy(x, t, reduction="none", ignore_index=-100) + torch.where(kept, z * lse * lse, 0.0)
    (ref * w).sum().backward()
    torch.testing.assert_close(ours, x.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("renormalize", [False, True])
def test_softmax_topk_matches_torch_and_gradchecks(gen, renormalize):
    x = torch.randn(5, 30, generator=gen)
    values, indices = ot.softmax_topk(x, 6, renormalize)
    want_values, want_indices = torch.topk(x, 6, dim=-1)
    assert torch.equal(indices, want_indices)
    want = torch.softmax(want_values, -1) if renormalize else torch.softmax(x, -1).gather(-1, want_indices)
    torch.testing.assert_close(values, want)
    xd = torch.randn(3, 11, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: ot.softmax_topk(x, 4, renormalize)[0], (xd,))


def test_opcheck_of_the_new_ops(gen):
    x = torch.randn(3, 9, generator=gen, requires_grad=True)
    t = torch.tensor([0, -100, 8])
    torch.library.opcheck(torch.ops.onlinenorm.cross_entropy.default, (x, t, -100, 0.1, 0.0, True))
    torch.library.opcheck(torch.ops.onlinenorm.softmax_topk.default, (x, 3, False))


def test_bad_reduction_raises(gen):
    with pytest.raises(ValueError, match="reduction"):
        ot.cross_entropy(torch.randn(2, 3), torch.tensor([0, 1]), reduction="avg")
