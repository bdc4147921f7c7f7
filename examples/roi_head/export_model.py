"""Script the RoI head and save everything the C++ demo needs.

Writes into --out-dir:
  roi_head.pt       the TorchScript model (RoIHead, parameters on the CPU)
  roi_head_data.pt  a scripted container module whose buffers hold the example
                    inputs and the eager Python outputs:
                      features [N, C, H, W], rois [K, 5],
                      expected [K, num_classes]  (eager RoIHead output)
                      pooled   [K, C, 7, 7]      (eager mmops.roi_align output)
                    and whose attributes hold the RoIAlign settings and the
                    device the expected outputs were computed on.

C++ reads the container with torch::jit::load(...).attr("features").toTensor().
Everything is saved on the CPU so the files load on machines without a GPU.

Usage: PYTHONPATH=python python examples/roi_head/export_model.py --out-dir DIR [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from model import POOL_SIZE, SAMPLING_RATIO, SPATIAL_SCALE, RoIHead  # noqa: E402

import mmops  # noqa: E402

# torch.jit.script is deprecated in recent PyTorch but remains the way to hand
# a model to a libtorch C++ program.
warnings.filterwarnings("ignore", message=r".*torch\.jit\.\w+.* is deprecated", category=FutureWarning)


def disable_tf32() -> None:
    """Plain fp32 convolutions and matmuls, so CPU, CUDA, Python and C++ agree
    to ~1e-6 (the C++ program does the same)."""
    cudnn_conv = getattr(torch.backends.cudnn, "conv", None)
    if cudnn_conv is not None and hasattr(cudnn_conv, "fp32_precision"):
        # PyTorch >= 2.9: the new API (mixing it with the legacy flags is an error).
        cudnn_conv.fp32_precision = "ieee"
        torch.backends.cuda.matmul.fp32_precision = "ieee"
    else:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False


def make_inputs(
    num_images: int = 2,
    channels: int = 64,
    height: int = 100,
    width: int = 168,
    num_rois: int = 64,
    seed: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic features and rois (batch_idx, x1, y1, x2, y2) lying inside
    the (height / SPATIAL_SCALE) x (width / SPATIAL_SCALE) image."""
    gen = torch.Generator().manual_seed(seed)
    features = torch.randn(num_images, channels, height, width, generator=gen)
    img_h, img_w = height / SPATIAL_SCALE, width / SPATIAL_SCALE  # 400 x 672
    batch_idx = torch.randint(0, num_images, (num_rois,), generator=gen).float()
    x1 = torch.rand(num_rois, generator=gen) * img_w * 0.75
    y1 = torch.rand(num_rois, generator=gen) * img_h * 0.75
    bw = 8.0 + torch.rand(num_rois, generator=gen) * (img_w / 2 - 8.0)
    bh = 8.0 + torch.rand(num_rois, generator=gen) * (img_h / 2 - 8.0)
    x2 = torch.clamp(x1 + bw, max=img_w - 1)
    y2 = torch.clamp(y1 + bh, max=img_h - 1)
    rois = torch.stack([batch_idx, x1, y1, x2, y2], dim=1)
    return features, rois


class DemoData(nn.Module):
    """Tensor container, scripted so that C++ can read it with torch::jit::load."""

    def __init__(
        self,
        features: torch.Tensor,
        rois: torch.Tensor,
        expected: torch.Tensor,
        pooled: torch.Tensor,
        device: str,
    ) -> None:
        super().__init__()
        self.register_buffer("features", features)
        self.register_buffer("rois", rois)
        self.register_buffer("expected", expected)
        self.register_buffer("pooled", pooled)
        self.pool_size: int = POOL_SIZE
        self.spatial_scale: float = SPATIAL_SCALE
        self.sampling_ratio: int = SAMPLING_RATIO
        self.reference_device: str = device

    def forward(self) -> torch.Tensor:
        return self.expected


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", required=True, help="directory for roi_head.pt and roi_head_data.pt")
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cuda" if torch.cuda.is_available() else "cpu",
        help="device of the eager reference run (default: cuda when available)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the model weights")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda requested but torch.cuda.is_available() is False")
    device = torch.device(args.device)
    disable_tf32()
    os.makedirs(args.out_dir, exist_ok=True)

    model = RoIHead(seed=args.seed).eval()
    features, rois = make_inputs()

    # Eager reference on the requested device.
    model_dev = model.to(device)
    with torch.no_grad():
        expected = model_dev(features.to(device), rois.to(device))
        pooled = mmops.roi_align(
            features.to(device), rois.to(device), (POOL_SIZE, POOL_SIZE), SPATIAL_SCALE, SAMPLING_RATIO, "avg", True
        )
        scripted = torch.jit.script(model_dev)
        scripted_out = scripted(features.to(device), rois.to(device))
    script_diff = (scripted_out - expected).abs().max().item()
    if script_diff > 1e-5 * max(1.0, expected.abs().max().item()):
        print(f"error: scripted and eager outputs differ by {script_diff:.3e}", file=sys.stderr)
        return 1

    # Save on the CPU so the files load anywhere; C++ moves them to its device.
    scripted = scripted.cpu()
    model_path = os.path.join(args.out_dir, "roi_head.pt")
    data_path = os.path.join(args.out_dir, "roi_head_data.pt")
    scripted.save(model_path)
    data = DemoData(features, rois, expected.cpu(), pooled.cpu(), args.device)
    torch.jit.script(data).save(data_path)

    # The saved files must reproduce the eager output when loaded back.
    reloaded = torch.jit.load(model_path, map_location=device)
    with torch.no_grad():
        reload_diff = (reloaded(features.to(device), rois.to(device)) - expected).abs().max().item()

    print(f"device:        {args.device} (torch {torch.__version__})")
    print(f"features:      {list(features.shape)}  rois: {list(rois.shape)}")
    total, abs_total = expected.double().sum().item(), expected.double().abs().sum().item()
    print(f"output:        {list(expected.shape)}  sum {total:.6f}  abs-sum {abs_total:.6f}")
    print(f"scripted vs eager max|diff|: {script_diff:.3e}   reloaded vs eager: {reload_diff:.3e}")
    print(f"saved {model_path}")
    print(f"saved {data_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
