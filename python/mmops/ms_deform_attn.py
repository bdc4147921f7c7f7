"""Multi-scale deformable attention (Deformable DETR): the functional op and
mmcv's ``MultiScaleDeformableAttention`` module on top of it (TorchScript-scriptable)."""

import math
import warnings
from typing import Optional

import torch
from torch import Tensor, nn


def ms_deform_attn(
    value: Tensor,
    spatial_shapes: Tensor,
    level_start_index: Tensor,
    sampling_locations: Tensor,
    attention_weights: Tensor,
) -> Tensor:
    """mmcv's ``MultiScaleDeformableAttnFunction.apply`` (see docs/ops/ms_deform_attn.md).

    value [B, S, M, D] (M heads of D channels; the levels' H_l x W_l maps
    flattened row-major one after the other), spatial_shapes [L, 2] int64
    (H_l, W_l), level_start_index [L] int64 (first row of each level),
    sampling_locations [B, Q, M, L, P, 2] (x, y) in [0, 1], attention_weights
    [B, Q, M, L, P]. Returns [B, Q, M * D]: for each (query, head) the sum over
    levels and points of attention weight x bilinear sample of the level at
    pixel (x * W_l - 0.5, y * H_l - 0.5) (``grid_sample(align_corners=False,
    padding_mode="zeros")``). A non-finite location is worth 0. mmcv's
    ``im2col_step`` has no equivalent (the kernels need no im2col buffer).
    Differentiable w.r.t. value, sampling_locations and attention_weights.
    """
    return torch.ops.mmops.ms_deform_attn(
        value, spatial_shapes, level_start_index, sampling_locations, attention_weights
    )


def _level_start_index(spatial_shapes: Tensor) -> Tensor:
    """(0, H_0 W_0, H_0 W_0 + H_1 W_1, ...) for spatial_shapes [L, 2]."""
    sizes = spatial_shapes[:, 0] * spatial_shapes[:, 1]
    return torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])


class MultiScaleDeformableAttention(nn.Module):
    """mmcv.ops.MultiScaleDeformableAttention (Deformable DETR's attention), same
    constructor arguments, parameter names and initialisation, on top of
    ``torch.ops.mmops.ms_deform_attn`` on every device (mmcv falls back to a
    grid_sample composite on CPU).

    forward(query, key=None, value=None, identity=None, query_pos=None,
    key_padding_mask=None, reference_points, spatial_shapes, level_start_index=None):
    query [Q, B, C] ([B, Q, C] with batch_first), value [S, B, C] (defaults to
    query), reference_points [B, Q, L, 2] (normalised x, y) or [B, Q, L, 4]
    (cx, cy, w, h boxes), spatial_shapes [L, 2] int64, key_padding_mask [B, S]
    (True = padding: that value row is zeroed). level_start_index defaults to
    the running sum of H * W. Returns dropout(output_proj(attention)) + identity
    in the layout of query. ``key`` is unused (as in mmcv); ``norm_cfg`` and
    ``init_cfg`` are accepted and ignored (mmcv's BaseModule plumbing).
    """

    def __init__(
        self,
        embed_dims: int = 256,
        num_heads: int = 8,
        num_levels: int = 4,
        num_points: int = 4,
        im2col_step: int = 64,
        dropout: float = 0.1,
        batch_first: bool = False,
        norm_cfg: Optional[dict] = None,
        init_cfg: Optional[dict] = None,
        value_proj_ratio: float = 1.0,
    ) -> None:
        super().__init__()
        if embed_dims % num_heads != 0:
            raise ValueError(f"embed_dims must be divisible by num_heads, but got {embed_dims} and {num_heads}")
        dim_per_head = embed_dims // num_heads
        if dim_per_head == 0 or (dim_per_head & (dim_per_head - 1)) != 0:
            warnings.warn(
                "MultiScaleDeformableAttention: embed_dims / num_heads is best a power of 2 "
                "(the CUDA kernel is most efficient then)"
            )
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.num_levels = num_levels
        self.num_points = num_points
        self.im2col_step = im2col_step  # kept for mmcv compatibility; unused
        self.batch_first = batch_first
        self.dropout = nn.Dropout(dropout)
        self.sampling_offsets = nn.Linear(embed_dims, num_heads * num_levels * num_points * 2)
        self.attention_weights = nn.Linear(embed_dims, num_heads * num_levels * num_points)
        value_proj_size = int(embed_dims * value_proj_ratio)
        self.value_proj = nn.Linear(embed_dims, value_proj_size)
        self.output_proj = nn.Linear(value_proj_size, embed_dims)
        self.init_weights()

    def init_weights(self) -> None:
        """mmcv's initialisation: sampling offsets start on a ring of directions
        (head h points at angle 2 pi h / num_heads, point i at distance i + 1),
        uniform attention, Xavier-uniform projections with zero biases."""
        with torch.no_grad():
            nn.init.zeros_(self.sampling_offsets.weight)
            device = self.sampling_offsets.weight.device
            thetas = torch.arange(self.num_heads, dtype=torch.float32, device=device) * (2.0 * math.pi / self.num_heads)
            grid = torch.stack([thetas.cos(), thetas.sin()], -1)
            grid = (grid / grid.abs().max(-1, keepdim=True)[0]).view(self.num_heads, 1, 1, 2)
            grid = grid.repeat(1, self.num_levels, self.num_points, 1)
            for i in range(self.num_points):
                grid[:, :, i, :] *= i + 1
            self.sampling_offsets.bias.copy_(grid.view(-1))
            nn.init.zeros_(self.attention_weights.weight)
            nn.init.zeros_(self.attention_weights.bias)
            nn.init.xavier_uniform_(self.value_proj.weight)
            nn.init.zeros_(self.value_proj.bias)
            nn.init.xavier_uniform_(self.output_proj.weight)
            nn.init.zeros_(self.output_proj.bias)

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor] = None,
        value: Optional[Tensor] = None,
        identity: Optional[Tensor] = None,
        query_pos: Optional[Tensor] = None,
        key_padding_mask: Optional[Tensor] = None,
        reference_points: Optional[Tensor] = None,
        spatial_shapes: Optional[Tensor] = None,
        level_start_index: Optional[Tensor] = None,
    ) -> Tensor:
        if reference_points is None:
            raise ValueError("MultiScaleDeformableAttention: reference_points is required")
        if spatial_shapes is None:
            raise ValueError("MultiScaleDeformableAttention: spatial_shapes is required")
        if value is None:
            value = query
        if identity is None:
            identity = query
        if query_pos is not None:
            query = query + query_pos
        if not self.batch_first:
            query = query.permute(1, 0, 2)  # [B, Q, C]
            value = value.permute(1, 0, 2)  # [B, S, C]
        bs, num_query = query.shape[0], query.shape[1]
        num_value = value.shape[1]
        value = self.value_proj(value)
        if key_padding_mask is not None:
            value = value.masked_fill(key_padding_mask[..., None], 0.0)
        value = value.reshape(bs, num_value, self.num_heads, -1)
        offsets = self.sampling_offsets(query).view(bs, num_query, self.num_heads, self.num_levels, self.num_points, 2)
        weights = self.attention_weights(query).view(bs, num_query, self.num_heads, self.num_levels * self.num_points)
        weights = weights.softmax(-1).view(bs, num_query, self.num_heads, self.num_levels, self.num_points)
        if reference_points.shape[-1] == 2:
            # offsets are in pixels of each level: normalise by (W, H)
            normalizer = torch.stack([spatial_shapes[..., 1], spatial_shapes[..., 0]], -1).to(offsets.dtype)
            locations = reference_points[:, :, None, :, None, :] + offsets / normalizer[None, None, None, :, None, :]
        elif reference_points.shape[-1] == 4:
            locations = (
                reference_points[:, :, None, :, None, :2]
                + offsets / self.num_points * reference_points[:, :, None, :, None, 2:] * 0.5
            )
        else:
            raise ValueError(
                "MultiScaleDeformableAttention: the last dim of reference_points must be 2 or 4, "
                "but got " + str(reference_points.shape[-1])
            )
        if level_start_index is None:
            level_start_index = _level_start_index(spatial_shapes)
        output = ms_deform_attn(
            value, spatial_shapes, level_start_index, locations.to(value.dtype), weights.to(value.dtype)
        )
        output = self.output_proj(output)
        if not self.batch_first:
            output = output.permute(1, 0, 2)
        return self.dropout(output) + identity

    def extra_repr(self) -> str:
        return (
            f"embed_dims={self.embed_dims}, num_heads={self.num_heads}, num_levels={self.num_levels}, "
            f"num_points={self.num_points}, batch_first={self.batch_first}"
        )


__all__ = ["ms_deform_attn", "MultiScaleDeformableAttention"]
