"""An independent float64 reference of the operators (numpy only; nothing from the library), and
the contract's accuracy check (docs/API.md)."""
import numpy as np

def softmax(x):
    x = np.asarray(x, np.float64)
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(x):
    x = np.asarray(x, np.float64)
    m = np.max(x, axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def layer_norm_stats(h, eps):
    mean = h.mean(axis=-1)
    var = ((h - mean[..., None]) ** 2).mean(axis=-1)
    return mean, 1.0 / np.sqrt(var + eps)


def rms_norm_stats(h, eps):
    return 1.0 / np.sqrt((h * h).mean(axis=-1) + eps)


def layer_norm(h, scale, beta, eps):
    mean, rstd = layer_norm_stats(h, eps)
    return (h - mean[..., None]) * rstd[..., None] * scale + beta, mean, rstd


def rms_norm(h, scale, eps):
    rstd = rms_norm_stats(h, eps)
    return h * rstd[..., None] * scale, rstd


def softmax_backward(y, dy):
    return y * (dy - (y * dy).sum(axis=-1, keepdims=True))


def log_softmax_backward(y, dy):
    return dy - np.exp(y) * dy.sum(axis=-1, keepdims=True)


def norm_backward(x, dy, scale, mean, rstd):
    """(dx, dgamma, dbeta) from the definition; mean None: RMSNorm."""
    cols = x.shape[-1]
    xhat = (x if mean is None else x - mean[..., None]) * rstd[..., None]
    g = dy * scale
    c2 = (g * xhat).sum(axis=-1, keepdims=True) / cols
    inner = g - xhat * c2
    if mean is not None:
        inner = inner - g.sum(axis=-1, keepdims=True) / cols
    dx = rstd[..., None] * inner
    flat = lambda a: a.reshape(-1, cols)
    return dx, flat(dy * xhat).sum(axis=0), flat(dy).sum(axis=0)


def ulp(ref, dtype_name):
    """One unit in the last place of ref in a 16-bit dtype (0 for wider ones)."""
    a = np.abs(ref)
    if dtype_name == "float16":
        return np.spacing(a.astype(np.float16)).astype(np.float64)
    if dtype_name == "bfloat16":
        exponent = np.floor(np.log2(np.maximum(a, 2.0**-126)))
        return 2.0 ** (exponent - 7)
    return np.zeros_like(a)


def assert_within(got, ref, bound, dtype_name, what):
    """|got - ref| <= bound (+ one ulp of a 16-bit dtype) everywhere; a NaN fails."""
    got = np.asarray(got, np.float64)
    limit = bound + ulp(ref, dtype_name)
    ok = np.abs(got - ref) <= limit
    if not ok.all():
        i = np.argwhere(~ok)[0]
        raise AssertionError(
            f"{what}: {np.count_nonzero(~ok)} of {ok.size} elements out of bounds, first at {tuple(i)}: "
            f"got {got[tuple(i)]!r}, reference {ref[tuple(i)]!r}, bound {limit[tuple(i)]!r}"
        )


def as_float64(a):
    """Any array (numpy, ml_dtypes, torch) as float64 numpy."""
    if type(a).__module__.startswith("torch"):
        return a.detach().to("cpu").double().numpy()
    return np.asarray(a).astype(np.float64)


def cross_entropy(x, targets, ignore_index=-100, label_smoothing=0.0, z_loss=0.0, grad_scale=1.0):
    """(loss, lse, grad, grad_bound) of each row from the definition (docs/API.md,
    "cross-entropy"); ignored rows: loss 0 and gradient 0, bound 0 (they must be exactly 0)."""
    x = np.asarray(x, np.float64)
    cols = x.shape[-1]
    lse = np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1)) + x.max(-1)
    t = np.asarray(targets)
    ignored = t == ignore_index
    q = np.full(x.shape, label_smoothing / cols)
    hot = np.where(ignored, 0, t)
    np.put_along_axis(q, hot[..., None], np.take_along_axis(q, hot[..., None], -1) + (1 - label_smoothing), -1)
    loss = lse - (q * x).sum(-1) + z_loss * lse**2
    a = 1 + 2 * z_loss * lse
    p = np.exp(x - lse[..., None])
    grad = grad_scale * (a[..., None] * p - q)
    bound = abs(grad_scale) * (1e-5 * (np.abs(a) + 2 * z_loss * (np.abs(lse) + 1))[..., None] * p + 1e-30) + 1e-6 * abs(grad_scale)
    loss = np.where(ignored, 0.0, loss)
    grad = np.where(ignored[..., None], 0.0, grad)
    bound = np.where(ignored[..., None], 0.0, bound)
    return loss, lse, grad, bound


def cross_entropy_stat_bound(loss, lse):
    """The contract's bound on loss and lse: 1e-6 (|lse| + 1) + 1e-6 |loss|."""
    return 1e-6 * (np.abs(lse) + 1) + 1e-6 * np.abs(loss)


def topk(x, k, renormalize=False):
    """(values, indices): the k largest of each row (ties: the lower column), their softmax over
    the row or over the k selected."""
    x = np.asarray(x, np.float64)
    order = np.argsort(-x, axis=-1, kind="stable")[..., :k]
    picked = np.take_along_axis(x, order, -1)
    values = softmax(picked) if renormalize else np.take_along_axis(softmax(x), order, -1)
    return values, order


def moments(x):
    """(count, mean, M2) of each row, two-pass."""
    x = np.asarray(x, np.float64)
    mean = x.mean(-1)
    return x.shape[-1], mean, ((x - mean[..., None]) ** 2).sum(-1)
