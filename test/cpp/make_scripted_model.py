"""Scripts and saves a module that uses mmops.roi_align and mmops.multi_level_roi_align
(on the features and a 2x average-pooled copy), with its example inputs,
eager outputs and input gradient stored as buffers, for test_torchscript.cpp."""

import sys

import torch

import mmops


class PoolAndScale(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.avg = mmops.RoIAlign((3, 4), spatial_scale=0.5, sampling_ratio=2)
        self.max = mmops.RoIAlign(2, spatial_scale=0.5, sampling_ratio=0, pool_mode="max", aligned=False)
        self.fpn = mmops.MultiLevelRoIAlign(2, [2, 4], sampling_ratio=2, finest_scale=8)

    def forward(self, features: torch.Tensor, rois: torch.Tensor) -> torch.Tensor:
        a = self.avg(features, rois).flatten(1)
        b = self.max(features, rois).flatten(1)
        coarse = torch.nn.functional.avg_pool2d(features, 2)
        c = self.fpn([features, coarse], rois).flatten(1)
        return torch.cat([a, b, c], dim=1) * 3.0


def main(path: str) -> None:
    torch.manual_seed(0)
    features = torch.randn(2, 4, 12, 16, dtype=torch.float64)
    rois = torch.tensor(
        [[0, 1.0, 2.0, 20.0, 18.0], [1, 4.0, 0.0, 30.0, 23.0], [1, -3.0, 5.0, 9.0, 11.0]],
        dtype=torch.float64,
    )
    model = PoolAndScale()
    x = features.clone().requires_grad_(True)
    out = model(x, rois)  # eager Python is the reference
    weight = torch.randn_like(out)
    (out * weight).sum().backward()
    model.register_buffer("example_features", features)
    model.register_buffer("example_rois", rois)
    model.register_buffer("example_weight", weight)
    model.register_buffer("expected_output", out.detach())
    model.register_buffer("expected_grad", x.grad)
    scripted = torch.jit.script(model)
    torch.testing.assert_close(scripted(features, rois), out.detach(), rtol=0, atol=0)
    scripted.save(path)
    print(f"saved {path}")


if __name__ == "__main__":
    main(sys.argv[1])
