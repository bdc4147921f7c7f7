"""mmcv's SyncBatchNormFunction in Python on torch.distributed.

torch.nn.SyncBatchNorm is not mmcv's: it weights each process by its element
count (mmcv's stats_mode "default" weights processes equally, "N" by batch
size), needs CUDA inputs to synchronise, and averages nothing in backward.
So mmcv's module class stays and only its Function is replaced by this one,
which follows mmcv's kernels step by step (statistics in float32 for half).
"""

from typing import Any, Optional

import torch
import torch.distributed as dist
from torch import Tensor


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _reduce(vec: Tensor, n: int, total: Optional[Tensor], group: Any, group_size: int, stats_mode: str) -> Tensor:
    """The synchronised mean of per-process means (mmcv's two modes)."""
    if stats_mode == "N":
        vec = vec * n
    if group_size > 1:
        dist.all_reduce(vec, group=group)
    if total is None:  # the batch flag rides on the mean's vector
        total = vec[-1].detach()
    if stats_mode == "default":
        return vec / group_size, total
    if stats_mode == "N":
        return vec / total.clamp(min=1), total
    raise ValueError(f"MMSyncBN: stats_mode must be 'default' or 'N', got {stats_mode!r}")


class SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        input: Tensor,
        running_mean: Optional[Tensor],
        running_var: Optional[Tensor],
        weight: Optional[Tensor],
        bias: Optional[Tensor],
        momentum: float,
        eps: float,
        group: Any,
        group_size: int,
        stats_mode: str,
    ) -> Tensor:
        x = input.flatten(start_dim=2).to(_acc_dtype(input.dtype))
        n, c, spatial = x.shape
        if n > 0:
            vec = torch.cat([x.mean(dim=(0, 2)), x.new_ones(1)])
        else:  # an empty batch contributes zeros and no count
            vec = x.new_zeros(c + 1)
        vec, total = _reduce(vec, n, None, group, group_size, stats_mode)
        mean = vec[:c]
        var = ((x - mean[:, None]) ** 2).mean(dim=(0, 2)) if n > 0 else x.new_zeros(c)
        var, _ = _reduce(var, n, total, group, group_size, stats_mode)
        std = torch.sqrt(var + eps)
        norm = (x - mean[:, None]) / std[:, None]
        out = norm if weight is None else norm * weight.to(x.dtype)[:, None] + bias.to(x.dtype)[:, None]
        if running_mean is not None:
            m = total.clamp(max=1) * momentum  # no update when every process was empty
            count = n * spatial * group_size
            unbiased = var * count / (count - 1) if count > 1 else var
            with torch.no_grad():
                running_mean.mul_(1 - m).add_(m * mean.to(running_mean.dtype))
                running_var.mul_(1 - m).add_(m * unbiased.to(running_var.dtype))
        ctx.save_for_backward(norm, std, weight)
        ctx.group, ctx.group_size, ctx.shape = group, group_size, input.shape
        return out.to(input.dtype).view(input.shape)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple:
        norm, std, weight = ctx.saved_tensors
        g = grad_output.flatten(start_dim=2).to(norm.dtype)
        n, _, spatial = g.shape
        grad_weight = (g * norm).sum(dim=(0, 2))
        grad_bias = g.sum(dim=(0, 2))
        if ctx.group_size > 1:  # mmcv averages the parameter gradients
            dist.all_reduce(grad_weight, group=ctx.group)
            dist.all_reduce(grad_bias, group=ctx.group)
            grad_weight = grad_weight / ctx.group_size
            grad_bias = grad_bias / ctx.group_size
        scale = (weight.to(norm.dtype) if weight is not None else norm.new_ones(norm.size(1))) / std
        factor = max(n * spatial, 1)
        grad_input = scale[:, None] * (g - (grad_weight[:, None] * norm + grad_bias[:, None]) / factor)
        grad_input = grad_input.to(grad_output.dtype).view(ctx.shape)
        if weight is None:
            return grad_input, None, None, None, None, None, None, None, None, None
        return (
            grad_input,
            None,
            None,
            grad_weight.to(weight.dtype),
            grad_bias.to(weight.dtype),
            None,
            None,
            None,
            None,
            None,
        )
