"""Scripts and saves one module holding a submodule per detection op (roi_pool,
sigmoid/softmax focal loss, nms/batched_nms/soft_nms, bbox_overlaps, ms_deform_attn,
deform_conv2d / modulated_deform_conv2d), for
test_torchscript_ops.cpp.

Each submodule keeps its example inputs, the eager Python outputs and (for the
differentiable ops) the input gradients of sum(output * example_weight) as
buffers, so the C++ test needs nothing but the saved file:
    example_<name>    inputs of forward, in order (listed in the buffer-free
                      attribute ``input_names``)
    expected_<i>      the i-th output of forward (forward returns a tuple)
    example_weight    cotangent of output 0 (differentiable submodules only)
    expected_grad_<name>  gradient of sum(output_0 * example_weight) w.r.t. input <name>
"""

import sys
from typing import List, Tuple

import torch
from torch import Tensor

import mmops


class RoIPoolOps(torch.nn.Module):
    """mmops.RoIPool (module) and torch.ops.mmops.roi_pool, two scales and sizes."""

    input_names: List[str]
    grad_names: List[str]

    def __init__(self) -> None:
        super().__init__()
        self.input_names = ["features", "rois"]
        self.grad_names = ["features"]
        self.pool = mmops.RoIPool((3, 2), spatial_scale=0.5)
        self.square = mmops.RoIPool(4, 0.25)

    def forward(self, features: Tensor, rois: Tensor) -> Tuple[Tensor]:
        a = self.pool(features * 2.0, rois).flatten(1)
        b = self.square(features, rois).flatten(1)
        c = torch.ops.mmops.roi_pool(features, rois, [2, 3], 1.0).flatten(1)
        return (torch.cat([a, b, c], dim=1),)


class FocalLossOps(torch.nn.Module):
    """Sigmoid and softmax focal loss, every reduction, with and without class weights."""

    input_names: List[str]
    grad_names: List[str]

    def __init__(self, weight: Tensor) -> None:
        super().__init__()
        self.input_names = ["logits", "sigmoid_target", "softmax_target"]
        self.grad_names = ["logits"]
        self.sig_none = mmops.SigmoidFocalLoss(2.0, 0.25, weight, "none")
        self.sig_sum = mmops.SigmoidFocalLoss(1.5, 0.4, None, "sum")
        self.soft_none = mmops.SoftmaxFocalLoss(2.0, 0.25, weight, "none")
        self.soft_mean = mmops.SoftmaxFocalLoss(0.5, 0.75)

    def forward(self, logits: Tensor, sigmoid_target: Tensor, softmax_target: Tensor) -> Tuple[Tensor]:
        parts = [
            self.sig_none(logits, sigmoid_target).flatten(),
            self.sig_sum(logits, sigmoid_target).reshape(1),
            torch.ops.mmops.sigmoid_focal_loss(logits, sigmoid_target, 2.0, 0.25, None, "mean").reshape(1),
            self.soft_none(logits, softmax_target).flatten(),
            self.soft_mean(logits, softmax_target).reshape(1),
            torch.ops.mmops.softmax_focal_loss(logits, softmax_target, 1.0, 0.5, None, "sum").reshape(1),
        ]
        return (torch.cat(parts),)


class NmsOps(torch.nn.Module):
    """nms, batched_nms and soft_nms, as ops and through the mmcv-style wrappers."""

    input_names: List[str]
    grad_names: List[str]

    def __init__(self) -> None:
        super().__init__()
        self.input_names = ["boxes", "scores", "idxs"]
        self.grad_names = []

    def forward(self, boxes: Tensor, scores: Tensor, idxs: Tensor
                ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        keep = torch.ops.mmops.nms(boxes, scores, 0.5)
        keep_batched = torch.ops.mmops.batched_nms(boxes, scores, idxs, 0.4)
        lin_dets, lin_keep = torch.ops.mmops.soft_nms(boxes, scores, 0.3, 0.5, 1e-3, "linear")
        gauss_dets, gauss_keep = mmops.soft_nms(boxes, scores, 0.3, 0.5, 0.05, "gaussian")
        dets, inds = mmops.nms(boxes, scores, 0.6, 1, 0.1, 12)
        return keep, keep_batched, lin_dets, lin_keep, gauss_dets, gauss_keep, dets, inds, boxes[keep]


class BBoxOverlapsOps(torch.nn.Module):
    """bbox_overlaps: iou / iof, all pairs / aligned, offset 0 / 1."""

    input_names: List[str]
    grad_names: List[str]

    def __init__(self) -> None:
        super().__init__()
        self.input_names = ["bboxes1", "bboxes2"]
        self.grad_names = ["bboxes1", "bboxes2"]

    def forward(self, bboxes1: Tensor, bboxes2: Tensor) -> Tuple[Tensor]:
        n = bboxes1.size(0)
        parts = [
            mmops.bbox_overlaps(bboxes1, bboxes2).flatten(),
            torch.ops.mmops.bbox_overlaps(bboxes1, bboxes2, "iof", False, 1).flatten(),
            mmops.bbox_overlaps(bboxes1, bboxes2[:n], "iou", True, 1),
            torch.ops.mmops.bbox_overlaps(bboxes1, bboxes2[:n], "iof", True, 0),
        ]
        return (torch.cat(parts),)


class MsDeformAttnOps(torch.nn.Module):
    """ms_deform_attn (op and functional wrapper) and mmops.MultiScaleDeformableAttention."""

    input_names: List[str]
    grad_names: List[str]

    def __init__(self) -> None:
        super().__init__()
        self.input_names = ["value", "spatial_shapes", "level_start_index", "sampling_locations",
                            "attention_weights", "query", "reference_points"]
        self.grad_names = ["value", "sampling_locations", "attention_weights", "query"]
        self.attn = mmops.MultiScaleDeformableAttention(embed_dims=8, num_heads=2, num_levels=2, num_points=2,
                                                        dropout=0.0, batch_first=True)

    def forward(self, value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor, sampling_locations: Tensor,
                attention_weights: Tensor, query: Tensor, reference_points: Tensor) -> Tuple[Tensor]:
        a = torch.ops.mmops.ms_deform_attn(value, spatial_shapes, level_start_index, sampling_locations,
                                           attention_weights).flatten()
        b = mmops.ms_deform_attn(value * 2.0, spatial_shapes, level_start_index, sampling_locations,
                                 attention_weights).flatten()
        c = self.attn(query, reference_points=reference_points, spatial_shapes=spatial_shapes,
                      level_start_index=level_start_index).flatten()
        return (torch.cat([a, b, c]),)


class DeformConvOps(torch.nn.Module):
    """deform_conv2d / modulated_deform_conv2d (ops) and mmops.DeformConv2dPack /
    mmops.ModulatedDeformConv2dPack (modules)."""

    input_names: List[str]
    grad_names: List[str]

    def __init__(self) -> None:
        super().__init__()
        self.input_names = ["input", "offset", "mask"]
        self.grad_names = ["input", "offset", "mask"]
        self.dcn = mmops.DeformConv2dPack(4, 6, 3, padding=1, deform_groups=2)
        self.dcn2 = mmops.ModulatedDeformConv2dPack(4, 4, 3, stride=2, padding=1, groups=2)

    def forward(self, input: Tensor, offset: Tensor, mask: Tensor) -> Tuple[Tensor]:
        a = torch.ops.mmops.modulated_deform_conv2d(input, offset, mask, self.dcn.weight, None, [1, 1], [1, 1],
                                                    [1, 1], 1, 2).flatten()
        b = torch.ops.mmops.deform_conv2d(input, offset, self.dcn.weight, None, [1, 1], [1, 1], [1, 1], 1,
                                          2).flatten()
        c = self.dcn(input).flatten()
        d = self.dcn2(input).flatten()
        return (torch.cat([a, b, c, d]),)


class DetectionOps(torch.nn.Module):
    def __init__(self, focal_weight: Tensor) -> None:
        super().__init__()
        self.roi_pool = RoIPoolOps()
        self.focal_loss = FocalLossOps(focal_weight)
        self.nms = NmsOps()
        self.bbox_overlaps = BBoxOverlapsOps()
        self.deform_conv = DeformConvOps()
        self.ms_deform_attn = MsDeformAttnOps()

    def forward(self) -> int:  # the submodules are what the C++ test runs
        return 0


def _random_boxes(g: torch.Generator, n: int, image: float, side: float) -> Tensor:
    xy = torch.rand(n, 2, generator=g, dtype=torch.float64) * image
    wh = torch.rand(n, 2, generator=g, dtype=torch.float64) * side + 0.5
    return torch.cat([xy, xy + wh], 1)


def _record(module: torch.nn.Module, inputs: List[Tensor], g: torch.Generator) -> None:
    """Runs module eagerly (the reference) and stores inputs, outputs and gradients as buffers."""
    names = module.input_names
    assert len(names) == len(inputs)
    leaves = [x.clone().requires_grad_(n in module.grad_names) for n, x in zip(names, inputs)]
    outs = module(*leaves)
    if module.grad_names:
        weight = torch.randn(outs[0].shape, generator=g, dtype=outs[0].dtype)
        (outs[0] * weight).sum().backward()
        module.register_buffer("example_weight", weight)
        for n, x in zip(names, leaves):
            if n in module.grad_names:
                assert x.grad is not None and x.grad.abs().sum() > 0, n
                module.register_buffer(f"expected_grad_{n}", x.grad)
    for n, x in zip(names, inputs):
        module.register_buffer(f"example_{n}", x)
    for i, out in enumerate(outs):
        module.register_buffer(f"expected_{i}", out.detach())


def main(path: str) -> None:
    g = torch.Generator().manual_seed(20240)

    # roi_pool: float64 features, rois in the scaled image (2x the feature map at scale 0.5).
    features = torch.randn(2, 3, 10, 12, generator=g, dtype=torch.float64)
    rois = torch.tensor(
        [[0, 1.0, 2.0, 19.0, 15.0], [1, 4.0, 0.0, 23.0, 19.0], [1, -3.0, 5.0, 9.0, 11.0],
         [0, 6.0, 6.0, 6.0, 6.0], [1, 30.0, 30.0, 40.0, 44.0]],
        dtype=torch.float64,
    )

    # focal losses: 7 rows, 5 classes; sigmoid targets include the background class 5.
    logits = torch.randn(7, 5, generator=g, dtype=torch.float64) * 2.0
    sigmoid_target = torch.tensor([0, 4, 5, 2, 5, 1, 3], dtype=torch.long)
    softmax_target = torch.tensor([0, 4, 1, 2, 3, 1, 3], dtype=torch.long)
    focal_weight = torch.tensor([0.5, 1.0, 2.0, 0.25, 1.5], dtype=torch.float64)

    # nms: float32, many overlaps, a score tie, three categories.
    boxes = _random_boxes(g, 40, 24.0, 20.0).float()
    scores = torch.rand(40, generator=g, dtype=torch.float64).float()
    scores[7] = scores[3]
    idxs = torch.randint(0, 3, (40,), generator=g)

    # bbox_overlaps: float64, 6 x 8 (the first 6 of bboxes2 for the aligned modes).
    bboxes1 = _random_boxes(g, 6, 12.0, 15.0)
    bboxes2 = _random_boxes(g, 8, 12.0, 15.0)

    # ms_deform_attn: float64, two levels (3 x 4, 2 x 2), D = 3; the module on the same levels
    # (self-attention over the 16 rows) with random float64 parameters.
    msda_shapes = torch.tensor([[3, 4], [2, 2]])
    msda_starts = torch.tensor([0, 12])
    msda_value = torch.randn(2, 16, 2, 3, generator=g, dtype=torch.float64)
    msda_loc = torch.rand(2, 5, 2, 2, 2, 2, generator=g, dtype=torch.float64) * 1.2 - 0.1
    msda_attn = torch.rand(2, 5, 2, 2, 2, generator=g, dtype=torch.float64)
    msda_query = torch.randn(2, 16, 8, generator=g, dtype=torch.float64)
    msda_ref = torch.rand(2, 16, 2, 2, generator=g, dtype=torch.float64)

    # deform conv: float64 2 x 4 x 5 x 6 input, offsets of 2 deform groups spread over a few
    # pixels, masks in [0, 1]; the modules' parameters (conv_offset included) random float64.
    dcn_input = torch.randn(2, 4, 5, 6, generator=g, dtype=torch.float64)
    dcn_offset = torch.randn(2, 36, 5, 6, generator=g, dtype=torch.float64) * 1.5
    dcn_mask = torch.rand(2, 18, 5, 6, generator=g, dtype=torch.float64)

    model = DetectionOps(focal_weight)
    model.ms_deform_attn.attn.double()
    with torch.no_grad():
        for p in model.ms_deform_attn.attn.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.3)
    _record(model.roi_pool, [features, rois], g)
    _record(model.focal_loss, [logits, sigmoid_target, softmax_target], g)
    _record(model.nms, [boxes, scores, idxs], g)
    _record(model.bbox_overlaps, [bboxes1, bboxes2], g)
    model.deform_conv.double()
    with torch.no_grad():
        for p in model.deform_conv.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.3)
    _record(model.deform_conv, [dcn_input, dcn_offset, dcn_mask], g)
    _record(model.ms_deform_attn, [msda_value, msda_shapes, msda_starts, msda_loc, msda_attn, msda_query,
                                   msda_ref], g)

    scripted = torch.jit.script(model)
    for name in ("roi_pool", "focal_loss", "nms", "bbox_overlaps", "ms_deform_attn", "deform_conv"):
        eager, sub = getattr(model, name), getattr(scripted, name)
        args = [getattr(eager, f"example_{n}") for n in eager.input_names]
        for i, out in enumerate(sub(*args)):
            torch.testing.assert_close(out, getattr(eager, f"expected_{i}"), rtol=0, atol=0)
    scripted.save(path)

    loaded = torch.jit.load(path)
    for name in ("roi_pool", "focal_loss", "nms", "bbox_overlaps", "ms_deform_attn", "deform_conv"):
        sub = getattr(loaded, name)
        args = [getattr(sub, f"example_{n}") for n in sub.input_names]
        for i, out in enumerate(sub(*args)):
            torch.testing.assert_close(out, getattr(sub, f"expected_{i}"), rtol=0, atol=0)
    print(f"saved {path}")


if __name__ == "__main__":
    main(sys.argv[1])
