"""A tiny detector made of mmops ops, for torch.export + AOTInductor.

DetectorHead.forward(features, rois, boxes, scores) -> (logits, keep, kept_feats):
  1. DCNv1 (deform_conv2d with a bias) then DCNv2 (modulated_deform_conv2d, no
     bias, padding and dilation 2) over features [1, C, H, W];
  2. roi_align ("avg") of the K rois [K, 5] and multi-scale deformable attention
     (2 levels: the map and its 2x average-pool) with one query per roi, sampled
     around the roi centre; both feed the classifier: logits [K, num_classes];
  3. nms of the N proposals (boxes [N, 4], scores [N]) -> keep (int64, a
     data-dependent length) and roi_align ("max") of the kept boxes:
     kept_feats [len(keep), C * POOL * POOL].

K and N (0 included) are the dynamic dimensions of the export. The calls exercise
what AOTInductor has to pass to a custom op: optional tensors (bias=None),
int lists (output_size, stride, padding, dilation), floats, strings
(pool_mode), bools, and an output whose size only the data knows (nms).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

import mmops

CHANNELS = 8
HEIGHT = WIDTH = 16  # feature map; the image is STRIDE times larger
STRIDE = 4
POOL = 4
HEADS, LEVELS, POINTS = 2, 2, 2
NUM_CLASSES = 5
IOU_THRESHOLD = 0.5


def _seeded_(tensor: Tensor, gen: torch.Generator, scale: float) -> None:
    tensor.copy_(torch.empty(tensor.shape).uniform_(-scale, scale, generator=gen))


class DetectorHead(nn.Module):
    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        c, taps = CHANNELS, 9
        self.dcn_offset = nn.Conv2d(c, 2 * taps, 3, padding=1)
        self.dcn_weight = nn.Parameter(torch.empty(c, c, 3, 3))
        self.dcn_bias = nn.Parameter(torch.empty(c))
        self.mdcn_offset_mask = nn.Conv2d(c, 3 * taps, 3, padding=2, dilation=2)
        self.mdcn_weight = nn.Parameter(torch.empty(c, c, 3, 3))
        pooled = c * POOL * POOL
        self.attn_offsets = nn.Linear(pooled, HEADS * LEVELS * POINTS * 2)
        self.attn_weights = nn.Linear(pooled, HEADS * LEVELS * POINTS)
        self.cls = nn.Linear(pooled + c, NUM_CLASSES)
        shapes = torch.tensor([[HEIGHT, WIDTH], [HEIGHT // 2, WIDTH // 2]], dtype=torch.long)
        self.register_buffer("spatial_shapes", shapes)
        self.register_buffer("level_start_index", torch.tensor([0, HEIGHT * WIDTH], dtype=torch.long))
        self.reset_parameters(seed)

    @torch.no_grad()
    def reset_parameters(self, seed: int) -> None:
        # Independent of the global RNG and of the device.
        gen = torch.Generator().manual_seed(seed)
        for name, p in self.named_parameters():
            fan_in = p[0].numel() if p.dim() > 1 else p.numel()
            _seeded_(p, gen, (0.5 if "offset" in name else 1.0) / fan_in**0.5)

    def _backbone(self, features: Tensor) -> Tensor:
        offset = self.dcn_offset(features)
        x = torch.relu(mmops.deform_conv2d(features, offset, self.dcn_weight, self.dcn_bias, padding=1))
        om = self.mdcn_offset_mask(x)
        offset, mask = om[:, :18], torch.sigmoid(om[:, 18:])
        return mmops.modulated_deform_conv2d(x, offset, mask, self.mdcn_weight, None, padding=2, dilation=2)

    def _attend(self, x: Tensor, query: Tensor, rois: Tensor) -> Tensor:
        k = rois.shape[0]
        coarse = torch.nn.functional.avg_pool2d(x, 2)
        flat = torch.cat([x.flatten(2), coarse.flatten(2)], dim=2)  # [1, C, S]
        value = flat.transpose(1, 2).reshape(1, -1, HEADS, CHANNELS // HEADS)
        image = torch.tensor([WIDTH * STRIDE, HEIGHT * STRIDE], dtype=rois.dtype, device=rois.device)
        centre = (rois[:, 1:3] + rois[:, 3:5]) / (2 * image)  # [K, 2] normalised (x, y)
        shift = 0.05 * torch.tanh(self.attn_offsets(query)).view(1, k, HEADS, LEVELS, POINTS, 2)
        locations = centre.view(1, k, 1, 1, 1, 2) + shift
        weights = torch.softmax(self.attn_weights(query).view(1, k, HEADS, LEVELS * POINTS), dim=-1)
        weights = weights.view(1, k, HEADS, LEVELS, POINTS)
        out = mmops.ms_deform_attn(value, self.spatial_shapes, self.level_start_index, locations, weights)
        return out[0]  # [K, C]

    def forward(self, features: Tensor, rois: Tensor, boxes: Tensor, scores: Tensor):
        x = self._backbone(features)
        pooled = mmops.roi_align(x, rois, POOL, 1.0 / STRIDE, 2, "avg", True).flatten(1)
        logits = self.cls(torch.cat([pooled, self._attend(x, pooled, rois)], dim=1))
        keep = torch.ops.mmops.nms(boxes, scores, IOU_THRESHOLD)
        kept = boxes[keep]
        kept_rois = torch.cat([kept.new_zeros(kept.shape[0], 1), kept], dim=1)
        kept_feats = mmops.roi_align(x, kept_rois, POOL, 1.0 / STRIDE, 2, "max", False).flatten(1)
        return logits, keep, kept_feats


def make_inputs(num_rois: int, num_boxes: int, seed: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """features [1, C, H, W], rois [K, 5] (batch 0), boxes [N, 4] in image
    coordinates (clusters of overlapping boxes, so nms drops some), scores [N]."""
    gen = torch.Generator().manual_seed(seed)
    img_w, img_h = WIDTH * STRIDE, HEIGHT * STRIDE

    def random_boxes(n: int) -> Tensor:
        x1 = torch.rand(n, generator=gen) * img_w * 0.7
        y1 = torch.rand(n, generator=gen) * img_h * 0.7
        w = 6.0 + torch.rand(n, generator=gen) * img_w * 0.3
        h = 6.0 + torch.rand(n, generator=gen) * img_h * 0.3
        return torch.stack([x1, y1, (x1 + w).clamp(max=img_w - 1), (y1 + h).clamp(max=img_h - 1)], dim=1)

    features = torch.randn(1, CHANNELS, HEIGHT, WIDTH, generator=gen)
    rois = torch.cat([torch.zeros(num_rois, 1), random_boxes(num_rois)], dim=1)
    centres = random_boxes(max(1, num_boxes // 4))
    boxes = centres[torch.randint(0, centres.shape[0], (num_boxes,), generator=gen)]
    boxes = boxes + torch.randn(num_boxes, 4, generator=gen) * 2.0
    boxes[:, 2:] = torch.maximum(boxes[:, 2:], boxes[:, :2] + 1.0)
    scores = torch.rand(num_boxes, generator=gen)
    return features, rois, boxes, scores
