"""A small Faster R-CNN style RoI head built on mmops.RoIAlign.

The model is TorchScript-able: ``torch.jit.script(RoIHead())`` records a call
to ``torch.ops.mmops.roi_align``, so a C++ program that links mmops::mmops can
load and run the scripted file with ``torch::jit::load``.
"""

from __future__ import annotations

import torch
from torch import nn

import mmops

# RoIAlign settings of the head. export_model.py stores them next to the data
# so the C++ program can call mmops::roi_align with the very same arguments.
POOL_SIZE = 7
SPATIAL_SCALE = 1.0 / 4.0
SAMPLING_RATIO = 2


class RoIHead(nn.Module):
    """RoIAlign -> conv3x3 + ReLU -> flatten -> fc + ReLU -> classifier."""

    def __init__(
        self,
        in_channels: int = 64,
        conv_channels: int = 64,
        hidden: int = 256,
        num_classes: int = 81,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.roi_align = mmops.RoIAlign(POOL_SIZE, spatial_scale=SPATIAL_SCALE, sampling_ratio=SAMPLING_RATIO)
        self.conv = nn.Conv2d(in_channels, conv_channels, 3, padding=1)
        self.fc = nn.Linear(conv_channels * POOL_SIZE * POOL_SIZE, hidden)
        self.cls = nn.Linear(hidden, num_classes)
        self.reset_parameters(seed)

    @torch.no_grad()
    def reset_parameters(self, seed: int) -> None:
        # Deterministic init independent of the global RNG state and device.
        gen = torch.Generator().manual_seed(seed)
        for layer in (self.conv, self.fc, self.cls):
            fan_in = layer.weight[0].numel()
            bound = 1.0 / fan_in**0.5
            layer.weight.copy_(torch.empty(layer.weight.shape).uniform_(-bound, bound, generator=gen))
            layer.bias.copy_(torch.empty(layer.bias.shape).uniform_(-bound, bound, generator=gen))

    def forward(self, features: torch.Tensor, rois: torch.Tensor) -> torch.Tensor:
        x = self.roi_align(features, rois)  # [K, C, 7, 7]
        x = torch.relu(self.conv(x))
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc(x))
        return self.cls(x)  # [K, num_classes]
