"""A small Oriented R-CNN style head: roi_align_rotated -> conv -> linear, box
decoding, then nms_rotated on its boxes.

As a conformance case its module runs through torch.compile, torch.export and
TorchScript in Python, and the ctest fixture (test/cpp/make_scripted_cases.py)
scripts it, saves it and runs it from C++ (test_torchscript.cpp), outputs and
gradients against the eager run. The tests below check the head itself against
a composition of the float64 references.
"""

import math

import pytest
import torch
from conformance import ConformanceCase, ConformanceSuite, Sample
from roi_align_rotated_reference import roi_align_rotated_ref
from test_nms_rotated import nms_ref
from torch import Tensor

import mmops

CHANNELS = 4
POOLED = 5
IOU_THRESHOLD = 0.5


class OrientedHead(torch.nn.Module):
    """Features and rotated proposals [K, 6] in; class logits, refined boxes
    [K, 5] (cx, cy, w, h, theta) and the kept indices out."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(7)
        self.conv = torch.nn.Conv2d(CHANNELS, 6, 3, padding=1)
        self.fc = torch.nn.Linear(6 * POOLED * POOLED, 6)
        with torch.no_grad():
            self.fc.weight.mul_(0.02)  # small deltas: the refined boxes stay near their proposals
        self.iou_threshold = IOU_THRESHOLD

    def forward(self, features: Tensor, rois: Tensor):
        pooled = torch.ops.mmops.roi_align_rotated(features, rois, [5, 5], 0.5, 2, True, False)  # POOLED
        x = torch.relu(self.conv(pooled))
        out = self.fc(x.flatten(1))
        deltas, logits = out[:, :5], out[:, 5]
        prop = rois[:, 1:6]
        centre = prop[:, :2] + deltas[:, :2] * prop[:, 2:4]
        sides = prop[:, 2:4] * torch.exp(deltas[:, 2:4].clamp(max=1.0))
        theta = prop[:, 4:5] + deltas[:, 4:5]
        boxes = torch.cat([centre, sides, theta], 1)
        # one class-aware call: the image index as the label keeps images apart
        dets, keep = mmops.nms_rotated(boxes, torch.sigmoid(logits), self.iou_threshold, rois[:, 0])
        return logits, boxes, dets, keep


def proposals(batch: int, per_image: int, height: int, width: int, seed: int) -> Tensor:
    """Rotated proposals [K, 6] in image coordinates (the map is at scale 0.5): clusters of
    near-duplicates (IoU about 0.8 or more) around a few well-separated objects, so that the
    NMS decisions sit far from the threshold."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for b in range(batch):
        for obj in range(per_image // 3):
            cx = (obj + 0.5) * 2 * width / (per_image // 3)
            cy = height * (0.6 + 0.8 * (obj % 2))
            for _ in range(3):
                jitter = torch.randn(4, generator=g, dtype=torch.float64) * 0.05
                rows.append([b, cx + jitter[0], cy + jitter[1], 6 + jitter[2], 4, 0.3 + jitter[3]])
    return torch.tensor(rows, dtype=torch.float64)


def _sample(device, dtype, size):
    # K = 12 and 9: no size equals K, and K stays within the [2, 15] that torch's conv
    # fake kernel guards a batch to (else torch.compile recompiles at the second size)
    (n, h, w), per_image = ((2, 14, 16), 6) if size == 0 else ((3, 10, 22), 3)
    torch.manual_seed(30 + size)
    features = torch.randn(n, CHANNELS, h, w, dtype=dtype)
    rois = proposals(n, per_image, h, w, seed=size).to(dtype)
    return Sample((features.to(device), rois.to(device), [POOLED, POOLED], 0.5, 2, True, False))


CASES = [
    ConformanceCase(
        "oriented_head",
        torch.ops.mmops.roi_align_rotated,
        _sample,
        dtypes=(),  # the op's own cases compare CUDA with CPU per dtype
        grad_args=(0,),
        module=OrientedHead,
    )
]


class TestOrientedHeadConformance(ConformanceSuite):
    cases = CASES


@pytest.mark.parametrize("size", [0, 1])
def test_head_matches_reference_composition(size):
    head = OrientedHead().double()
    features, rois = _sample("cpu", torch.float64, size).args[:2]
    logits, boxes, dets, keep = head(features, rois)
    pooled = roi_align_rotated_ref(features, rois, [POOLED, POOLED], 0.5, 2, True, False)
    expected = head.fc(torch.relu(head.conv(pooled)).flatten(1))[:, 5]
    torch.testing.assert_close(logits, expected, rtol=1e-10, atol=1e-10)
    scores = torch.sigmoid(logits).detach()
    assert keep.tolist() == nms_ref(boxes.detach(), scores, IOU_THRESHOLD, rois[:, 0]).tolist()
    # each cluster collapses to one box, and every object of every image survives
    assert len(keep) == len(rois) // 3
    torch.testing.assert_close(dets[:, :5], boxes[keep])


def test_head_gradients_reach_the_features():
    head = OrientedHead().double()
    features, rois = _sample("cpu", torch.float64, 0).args[:2]
    features = features.clone().requires_grad_(True)
    logits, boxes, _, keep = head(features, rois)
    (logits.sum() + boxes[keep].sum()).backward()
    assert features.grad is not None and features.grad.abs().sum() > 0


def test_head_scripts_and_matches_eager():
    head = OrientedHead()
    scripted = torch.jit.script(head)
    features, rois = _sample("cpu", torch.float32, 1).args[:2]
    for a, b in zip(scripted(features, rois), head(features, rois)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert math.isfinite(float(head(features, rois)[0].sum()))


@pytest.mark.cuda
def test_head_cuda_matches_cpu():
    head = OrientedHead()
    features, rois = _sample("cpu", torch.float32, 1).args[:2]
    cpu = head(features, rois)
    gpu = head.cuda()(features.cuda(), rois.cuda())
    torch.testing.assert_close(gpu[0].cpu(), cpu[0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(gpu[1].cpu(), cpu[1], rtol=1e-4, atol=1e-4)
    assert gpu[3].cpu().tolist() == cpu[3].tolist()
