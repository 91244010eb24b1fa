"""PyTorch ops of the library (torch.library.custom_op, namespace "onlinenorm"): fake kernels for
torch.compile, autograd through the library's backward passes, cross-entropy whose forward
computes the gradient in the same pass, softmax top-k, and the modules LayerNorm and RMSNorm. Tensors compute where they live (CPU backend, or CUDA/HIP on torch's current stream)."""
from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from . import _backward, _forward
from ._cross_entropy import cross_entropy as _plain_cross_entropy
from ._onlinenorm import LAYER_NORM, RMS_NORM
from ._softmax_topk import softmax_topk as _plain_softmax_topk

_KIND_NAMES = {LAYER_NORM: "layer_norm", RMS_NORM: "rms_norm"}


def _contiguous(t: Optional[Tensor]) -> Optional[Tensor]:
    # Autograd hands in gradients of any strides (an expanded ones, say): rows need stride 1.
    return None if t is None else t.contiguous()


@torch.library.custom_op("onlinenorm::softmax", mutates_args=())
def _softmax(x: Tensor, log: bool) -> Tensor:
    return (_forward.log_softmax if log else _forward.softmax)(x.contiguous())


@_softmax.register_fake
def _(x: Tensor, log: bool) -> Tensor:
    return x.new_empty(x.shape)


@torch.library.custom_op("onlinenorm::softmax_backward", mutates_args=())
def _softmax_backward(y: Tensor, dy: Tensor, log: bool) -> Tensor:
    backward = _backward.log_softmax_backward if log else _backward.softmax_backward
    return backward(y.contiguous(), dy.contiguous(), out_dtype=y.dtype)


@_softmax_backward.register_fake
def _(y: Tensor, dy: Tensor, log: bool) -> Tensor:
    return y.new_empty(y.shape)


def _softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(output)
    ctx.log = inputs[1]


def _softmax_grad(ctx, dy):
    (y,) = ctx.saved_tensors
    return _softmax_backward(y, dy, ctx.log), None


_softmax.register_autograd(_softmax_grad, setup_context=_softmax_setup)


@torch.library.custom_op("onlinenorm::norm", mutates_args=())
def _norm(
    x: Tensor, residual: Optional[Tensor], gamma: Optional[Tensor], beta: Optional[Tensor],
    kind: int, eps: float, weight_offset: float,
) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """(y, h, mean, rstd); h = x + residual (empty without a residual), mean empty for RMSNorm."""
    r = _forward.norm(
        x.contiguous(), _KIND_NAMES[kind], _contiguous(gamma), _contiguous(beta), eps,
        weight_offset=weight_offset, residual=_contiguous(residual), residual_out=residual is not None,
    )
    h = r.residual_out if residual is not None else x.new_empty(0)
    mean = r.mean if kind == LAYER_NORM else x.new_empty(0, dtype=torch.float32)
    return r.y, h, mean, r.rstd


@_norm.register_fake
def _(x, residual, gamma, beta, kind, eps, weight_offset):
    stats = x.shape[:-1]
    h = x.new_empty(x.shape) if residual is not None else x.new_empty(0)
    mean = x.new_empty(stats if kind == LAYER_NORM else (0,), dtype=torch.float32)
    return x.new_empty(x.shape), h, mean, x.new_empty(stats, dtype=torch.float32)


@torch.library.custom_op("onlinenorm::norm_backward", mutates_args=())
def _norm_backward(
    x: Tensor, dy: Tensor, dresidual: Optional[Tensor], gamma: Optional[Tensor], mean: Tensor, rstd: Tensor,
    kind: int, weight_offset: float,
) -> Tuple[Tensor, Tensor, Tensor]:
    """(dx, dgamma, dbeta) in float32 for the parameters; dbeta empty for RMSNorm."""
    common = dict(weight_offset=weight_offset, dresidual=_contiguous(dresidual))
    if kind == LAYER_NORM:
        return _backward.layer_norm_backward(x, dy.contiguous(), mean, rstd, _contiguous(gamma), **common)
    dx, dgamma = _backward.rms_norm_backward(x, dy.contiguous(), rstd, _contiguous(gamma), **common)
    return dx, dgamma, x.new_empty(0, dtype=torch.float32)


@_norm_backward.register_fake
def _(x, dy, dresidual, gamma, mean, rstd, kind, weight_offset):
    cols = x.shape[-1]
    dbeta = x.new_empty((cols,) if kind == LAYER_NORM else (0,), dtype=torch.float32)
    return x.new_empty(x.shape), x.new_empty((cols,), dtype=torch.float32), dbeta


def _norm_setup(ctx, inputs, output):
    x, residual, gamma, beta, kind, _, weight_offset = inputs
    _, h, mean, rstd = output
    # The backward takes the row that was normalized: h when a residual was added.
    ctx.save_for_backward(h if residual is not None else x, gamma, mean, rstd)
    ctx.mark_non_differentiable(mean, rstd)
    ctx.kind, ctx.weight_offset = kind, weight_offset
    ctx.dtypes = tuple(None if t is None else t.dtype for t in (x, residual, gamma, beta))


def _norm_grad(ctx, dy, dh, _dmean, _drstd):
    normalized, gamma, mean, rstd = ctx.saved_tensors
    x_dtype, residual_dtype, gamma_dtype, beta_dtype = ctx.dtypes
    dx, dgamma, dbeta = _norm_backward(
        normalized, dy, dh if residual_dtype is not None else None, gamma, mean, rstd, ctx.kind, ctx.weight_offset
    )
    cast = lambda t, dtype: None if dtype is None else t.to(dtype)
    return (dx.to(x_dtype), cast(dx, residual_dtype), cast(dgamma, gamma_dtype), cast(dbeta, beta_dtype),
            None, None, None)


_norm.register_autograd(_norm_grad, setup_context=_norm_setup)


@torch.library.custom_op("onlinenorm::cross_entropy", mutates_args=())
def _cross_entropy(
    logits: Tensor, targets: Tensor, ignore_index: int, label_smoothing: float, z_loss: float, with_grad: bool,
) -> Tuple[Tensor, Tensor]:
    """(loss, grad): the per-row loss in float32 and, with_grad, the gradient of sum(loss) in the
    logits' dtype, from the same pass (empty without with_grad)."""
    common = dict(ignore_index=ignore_index, label_smoothing=label_smoothing, z_loss=z_loss)
    if not with_grad:
        return _plain_cross_entropy(logits.contiguous(), targets.contiguous(), **common), logits.new_empty(0)
    r = _plain_cross_entropy(logits.contiguous(), targets.contiguous(), grad=True, **common)
    return r.loss, r.grad


@_cross_entropy.register_fake
def _(logits, targets, ignore_index, label_smoothing, z_loss, with_grad):
    grad = logits.new_empty(logits.shape) if with_grad else logits.new_empty(0)
    return logits.new_empty(logits.shape[:-1], dtype=torch.float32), grad


def _cross_entropy_setup(ctx, inputs, output):
    _, grad = output
    ctx.mark_non_differentiable(grad)
    ctx.save_for_backward(grad)
    ctx.with_grad = inputs[5]


def _cross_entropy_grad(ctx, dloss, _dgrad):
    (grad,) = ctx.saved_tensors
    if not ctx.with_grad:
        raise RuntimeError("onlinenorm::cross_entropy: the forward ran without its gradient (with_grad=False)")
    # The saved gradient is of sum(loss) (grad_scale 1): each row scales by its incoming gradient.
    dlogits = (grad * dloss.unsqueeze(-1)).to(grad.dtype)
    return dlogits, None, None, None, None, None


_cross_entropy.register_autograd(_cross_entropy_grad, setup_context=_cross_entropy_setup)


@torch.library.custom_op("onlinenorm::softmax_topk", mutates_args=())
def _softmax_topk(x: Tensor, k: int, renormalize: bool) -> Tuple[Tensor, Tensor]:
    return _plain_softmax_topk(x.contiguous(), k, renormalize)


@_softmax_topk.register_fake
def _(x, k, renormalize):
    shape = tuple(x.shape[:-1]) + (k,)
    return x.new_empty(shape), x.new_empty(shape, dtype=torch.int64)


def _softmax_topk_setup(ctx, inputs, output):
    x, _, renormalize = inputs
    values, indices = output
    ctx.mark_non_differentiable(indices)
    ctx.renormalize, ctx.x_shape, ctx.x_dtype = renormalize, x.shape, x.dtype
    # Without renormalize the gradient reaches every column through the row's softmax: keep x.
    ctx.save_for_backward(None if renormalize else x, values, indices)


def _softmax_topk_grad(ctx, dvalues, _dindices):
    x, values, indices = ctx.saved_tensors
    v, dv = values.float(), dvalues.float()
    inner = (dv * v).sum(-1, keepdim=True)
    zeros = torch.zeros(ctx.x_shape, dtype=torch.float32, device=values.device)
    if ctx.renormalize:
        # The softmax over the k selected logits: its backward, at their columns (0 elsewhere).
        dx = zeros.scatter(-1, indices, v * (dv - inner))
    else:
        # v_i = p[idx_i] with p the whole row's softmax: dx_j = sum_i dv_i v_i [j == idx_i] - p_j sum_i dv_i v_i.
        p = torch.softmax(x.float(), -1)
        dx = zeros.scatter(-1, indices, dv * v) - p * inner
    return dx.to(ctx.x_dtype), None, None


_softmax_topk.register_autograd(_softmax_topk_grad, setup_context=_softmax_topk_setup)


_REDUCTIONS = ("mean", "sum", "none")


def cross_entropy(
    logits: Tensor, targets: Tensor, *, ignore_index: int = -100, reduction: str = "mean",
    label_smoothing: float = 0.0, z_loss: float = 0.0,
) -> Tensor:
    """torch.nn.functional.cross_entropy with the classes on the last axis: logits (..., C),
    targets (...) int64. reduction "mean" divides by the rows whose target is not ignore_index
    (as torch does), "sum" adds, "none" gives the per-row loss. z_loss adds z_loss * lse^2 per row.
    The forward computes the gradient in the same pass when the logits require grad (kept for the
    backward: one logits-sized tensor). The result has the logits' dtype; the reduction runs in
    float32."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction: {reduction!r} is none of {', '.join(_REDUCTIONS)}")
    with_grad = torch.is_grad_enabled() and logits.requires_grad
    loss, _ = _cross_entropy(logits, targets, int(ignore_index), float(label_smoothing), float(z_loss), with_grad)
    if reduction == "sum":
        loss = loss.sum()
    elif reduction == "mean":
        loss = loss.sum() / (targets != ignore_index).sum()
    return loss.to(logits.dtype)


def softmax_topk(x: Tensor, k: int, renormalize: bool = False) -> Tuple[Tensor, Tensor]:
    """(values, indices) of each row's k largest entries (onlinenorm.softmax_topk), values
    differentiable: their softmax over the whole row, or over the k selected with renormalize."""
    return _softmax_topk(x, k, renormalize)


def softmax(x: Tensor) -> Tensor:
    """Softmax over the last axis, differentiable and traceable by torch.compile."""
    return _softmax(x, False)


def log_softmax(x: Tensor) -> Tensor:
    return _softmax(x, True)


def layer_norm(
    x: Tensor, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, eps: float = 1e-5, *,
    residual: Optional[Tensor] = None, weight_offset: float = 0.0,
) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """LayerNorm over the last axis with the scale weight_offset + weight. With a residual, the
    row normalized is h = x + residual and (y, h) is returned."""
    y, h, _, _ = _norm(x, residual, weight, bias, LAYER_NORM, eps, weight_offset)
    return y if residual is None else (y, h)


def rms_norm(
    x: Tensor, weight: Optional[Tensor] = None, eps: float = 1e-6, *,
    residual: Optional[Tensor] = None, weight_offset: float = 0.0,
) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """RMSNorm over the last axis; residual and weight_offset as in layer_norm."""
    y, h, _, _ = _norm(x, residual, weight, None, RMS_NORM, eps, weight_offset)
    return y if residual is None else (y, h)


def _cols(normalized_shape: Union[int, Tuple[int]]) -> int:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(shape) != 1:
        raise ValueError(f"normalized_shape: onlinenorm normalizes the last axis only, got {shape}")
    return shape[0]


class LayerNorm(torch.nn.Module):
    """torch.nn.LayerNorm over the last axis, computed by the library; forward(x, residual=None)
    returns y, or (y, x + residual) with a residual. With weight_offset the scale is
    weight_offset + weight, and weight starts at 1 - weight_offset (a unit scale)."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 weight_offset: float = 0.0, device=None, dtype=None) -> None:
        super().__init__()
        cols = _cols(normalized_shape)
        self.eps, self.weight_offset = eps, weight_offset
        factory = dict(device=device, dtype=dtype)
        self.weight = torch.nn.Parameter(torch.full((cols,), 1.0 - weight_offset, **factory)) if elementwise_affine else None
        self.bias = torch.nn.Parameter(torch.zeros(cols, **factory)) if elementwise_affine and bias else None

    def forward(self, x: Tensor, residual: Optional[Tensor] = None):
        return layer_norm(x, self.weight, self.bias, self.eps, residual=residual, weight_offset=self.weight_offset)


class RMSNorm(torch.nn.Module):
    """RMSNorm over the last axis (Gemma-style with weight_offset=1), as LayerNorm."""

    def __init__(self, normalized_shape, eps: float = 1e-6, elementwise_affine: bool = True,
                 weight_offset: float = 0.0, device=None, dtype=None) -> None:
        super().__init__()
        cols = _cols(normalized_shape)
        self.eps, self.weight_offset = eps, weight_offset
        factory = dict(device=device, dtype=dtype)
        self.weight = torch.nn.Parameter(torch.full((cols,), 1.0 - weight_offset, **factory)) if elementwise_affine else None

    def forward(self, x: Tensor, residual: Optional[Tensor] = None):
        return rms_norm(x, self.weight, self.eps, residual=residual, weight_offset=self.weight_offset)


__all__ = ["LayerNorm", "RMSNorm", "cross_entropy", "layer_norm", "log_softmax", "rms_norm", "softmax", "softmax_topk"]
