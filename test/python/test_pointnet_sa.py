"""A PointNet++ set-abstraction layer: furthest_point_sample -> gather_points (the
centres) -> ball_query -> group_points -> shared MLP -> max over each ball.

As a conformance case its module runs through torch.compile, torch.export and
TorchScript in Python, and the ctest fixture (test/cpp/make_scripted_cases.py)
scripts it, saves it and runs it from C++ (test_torchscript.cpp), outputs against
the eager run. The tests below check the layer against a composition of the float64
references, its gradient, and mmops.QueryAndGroup / GroupAll against the same pieces.
"""

import pytest
import torch
from conformance import ConformanceCase, ConformanceSuite, Sample
from furthest_point_sample_reference import fps_xyz_reference
from neighbors_reference import ball_query_ref, knn_ref
from torch import Tensor

import mmops

NPOINT = 8
RADIUS = 0.4
NSAMPLE = 6


class SetAbstraction(torch.nn.Module):
    """xyz [B, N, 3] -> (centres [B, NPOINT, 3], features [B, 32, NPOINT]): the first SA
    layer of PointNet++ (xyz offsets only, normalised by the radius)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.npoint, self.radius, self.nsample = NPOINT, RADIUS, NSAMPLE  # TorchScript reads attributes
        self.mlp = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 1), torch.nn.ReLU(), torch.nn.Conv2d(16, 32, 1), torch.nn.ReLU()
        )

    def forward(self, xyz: Tensor):
        xyz_t = xyz.transpose(1, 2).contiguous()
        centre_idx = torch.ops.mmops.furthest_point_sample(xyz, self.npoint)
        centres = torch.ops.mmops.gather_points(xyz_t, centre_idx).transpose(1, 2).contiguous()
        ball = torch.ops.mmops.ball_query(0.0, self.radius, self.nsample, xyz, centres)
        grouped = torch.ops.mmops.group_points(xyz_t, ball)  # [B, 3, NPOINT, NSAMPLE]
        offsets = (grouped - centres.transpose(1, 2).unsqueeze(-1)) / self.radius
        return centres, self.mlp(offsets).amax(dim=-1)


def _cloud(batch: int, n: int, seed: int, dtype=torch.float64) -> Tensor:
    """Points in a unit cube, a few clusters denser than the rest (balls of unequal fill)."""
    g = torch.Generator().manual_seed(seed)
    xyz = torch.rand(batch, n, 3, generator=g, dtype=torch.float64)
    xyz[:, : n // 3] = 0.2 + 0.1 * torch.rand(batch, n // 3, 3, generator=g, dtype=torch.float64)
    return xyz.to(dtype)


def _sample(device, dtype, size):
    batch, n = (2, 64) if size == 0 else (3, 40)
    return Sample((_cloud(batch, n, seed=size, dtype=dtype).to(device), NPOINT))


CASES = [
    ConformanceCase(
        "pointnet_sa",
        torch.ops.mmops.furthest_point_sample,
        _sample,
        dtypes=(),  # the ops' own cases compare CUDA with CPU per dtype
        module=SetAbstraction,
    )
]


class TestPointNetSAConformance(ConformanceSuite):
    cases = CASES


def _reference(layer: SetAbstraction, xyz: Tensor):
    """The layer from the float64 references and plain indexing."""
    idx = fps_xyz_reference(xyz, NPOINT).long()
    centres = torch.stack([xyz[b, idx[b]] for b in range(xyz.shape[0])])
    ball = ball_query_ref(0.0, RADIUS, NSAMPLE, xyz, centres).long()
    grouped = torch.stack([xyz[b, ball[b]] for b in range(xyz.shape[0])])  # [B, NPOINT, NSAMPLE, 3]
    offsets = ((grouped - centres.unsqueeze(2)) / RADIUS).permute(0, 3, 1, 2)
    return centres, layer.mlp(offsets).amax(dim=-1)


@pytest.mark.parametrize("size", [0, 1])
def test_layer_matches_reference_composition(size):
    layer = SetAbstraction().double()
    xyz = _sample("cpu", torch.float64, size).args[0]
    centres, features = layer(xyz)
    ref_centres, ref_features = _reference(layer, xyz)
    torch.testing.assert_close(centres, ref_centres, rtol=0, atol=0)
    torch.testing.assert_close(features, ref_features, rtol=1e-12, atol=1e-12)
    assert features.shape == (xyz.shape[0], 32, NPOINT)


def test_layer_gradients_match_reference_composition():
    layer = SetAbstraction().double()
    xyz = _sample("cpu", torch.float64, 0).args[0]
    got = xyz.clone().requires_grad_(True)
    want = xyz.clone().requires_grad_(True)
    sum(t.sum() for t in layer(got)).backward()
    sum(t.sum() for t in _reference(layer, want)).backward()
    assert got.grad.abs().sum() > 0
    torch.testing.assert_close(got.grad, want.grad, rtol=1e-10, atol=1e-10)


def test_layer_scripts_and_matches_eager():
    layer = SetAbstraction()
    scripted = torch.jit.script(layer)
    xyz = _sample("cpu", torch.float32, 1).args[0]
    for a, b in zip(scripted(xyz), layer(xyz)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("max_radius", [RADIUS, None])
def test_query_and_group_matches_references(max_radius):
    xyz = _cloud(2, 50, seed=3)
    centres = xyz[:, :NPOINT].contiguous()
    features = torch.randn(2, 5, 50, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    module = mmops.QueryAndGroup(max_radius, NSAMPLE, return_grouped_xyz=True, return_grouped_idx=True)
    out, grouped_xyz, idx = module(xyz, centres, features)
    if max_radius is None:
        expected_idx = knn_ref(NSAMPLE, xyz, centres).transpose(1, 2)
    else:
        expected_idx = ball_query_ref(0.0, max_radius, NSAMPLE, xyz, centres)
    assert torch.equal(idx, expected_idx)
    ball = expected_idx.long()
    pts = torch.stack([xyz[b, ball[b]] for b in range(2)]).permute(0, 3, 1, 2)  # [B, 3, NPOINT, NSAMPLE]
    feats = torch.stack([features[b][:, ball[b]] for b in range(2)])  # [B, 5, NPOINT, NSAMPLE]
    torch.testing.assert_close(grouped_xyz, pts, rtol=0, atol=0)
    expected = torch.cat([pts - centres.transpose(1, 2).unsqueeze(-1), feats], dim=1)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def test_query_and_group_options():
    xyz = _cloud(1, 30, seed=6)
    centres = xyz[:, :4].contiguous()
    normalized = mmops.QueryAndGroup(RADIUS, NSAMPLE, normalize_xyz=True)(xyz, centres)
    plain = mmops.QueryAndGroup(RADIUS, NSAMPLE)(xyz, centres)
    torch.testing.assert_close(normalized, plain / RADIUS)
    assert plain.shape == (1, 3, 4, NSAMPLE)
    torch.manual_seed(0)
    out, unique_cnt = mmops.QueryAndGroup(RADIUS, NSAMPLE, uniform_sample=True, return_unique_cnt=True)(xyz, centres)
    ball = ball_query_ref(0.0, RADIUS, NSAMPLE, xyz, centres)
    assert unique_cnt[0].tolist() == [float(len(set(row))) for row in ball[0].tolist()]
    assert out.shape == (1, 3, 4, NSAMPLE)
    with pytest.raises(ValueError, match="unique_cnt"):
        mmops.QueryAndGroup(RADIUS, NSAMPLE, return_unique_cnt=True)
    with pytest.raises(ValueError, match="normalize_xyz"):
        mmops.QueryAndGroup(None, NSAMPLE, normalize_xyz=True)


def test_group_all_concatenates_xyz_and_features():
    xyz = _cloud(2, 10, seed=8)
    features = torch.randn(2, 4, 10, dtype=torch.float64)
    out = mmops.GroupAll()(xyz, None, features)
    assert out.shape == (2, 7, 1, 10)
    torch.testing.assert_close(out[:, :3, 0], xyz.transpose(1, 2), rtol=0, atol=0)
    torch.testing.assert_close(out[:, 3:, 0], features, rtol=0, atol=0)


@pytest.mark.cuda
def test_layer_cuda_matches_cpu():
    layer = SetAbstraction()
    xyz = _sample("cpu", torch.float32, 0).args[0]
    cpu = layer(xyz)
    gpu = layer.cuda()(xyz.cuda())
    torch.testing.assert_close(gpu[0].cpu(), cpu[0], rtol=0, atol=0)
    torch.testing.assert_close(gpu[1].cpu(), cpu[1], rtol=1e-5, atol=1e-5)
