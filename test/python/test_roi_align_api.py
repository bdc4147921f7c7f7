"""Python API of mmops.roi_align: functional wrapper, nn.Module, TorchScript,
torch.library.opcheck, torch.compile and torch.export."""
import pytest
import torch

import mmops
from conftest import random_rois, requires_cuda
from roi_align_reference import roi_align_ref, roi_align_ref_grad

op = torch.ops.mmops.roi_align


def _data(seed=0, N=2, C=3, H=8, W=10, K=7, dtype=torch.float32, device="cpu", scale=1.0):
    torch.manual_seed(seed)
    x = torch.randn(N, C, H, W, dtype=dtype, device=device)
    return x, random_rois(K, N, H, W, dtype=dtype, device=device, spatial_scale=scale)


# --------------------------------------------------------------------------- functional

def test_functional_list_of_boxes_equals_rois():
    torch.manual_seed(1)
    boxes = [torch.rand(3, 4) * 8, torch.rand(0, 4), torch.rand(2, 4) * 8]
    x = torch.randn(3, 3, 8, 10)
    rois = torch.cat([torch.cat([torch.full((len(b), 1), float(i)), b], 1)
                      for i, b in enumerate(boxes)])
    for mode in ("avg", "max"):
        out_list = mmops.roi_align(x, boxes, (3, 2), 0.5, 2, mode, False)
        out_rois = mmops.roi_align(x, rois, (3, 2), 0.5, 2, mode, False)
        assert out_list.shape == (5, 3, 3, 2)
        torch.testing.assert_close(out_list, out_rois, rtol=0, atol=0)
        torch.testing.assert_close(out_rois, op(x, rois, [3, 2], 0.5, 2, mode, False),
                                   rtol=0, atol=0)
        torch.testing.assert_close(out_list.double(),
                                   roi_align_ref(x, rois, (3, 2), 0.5, 2, mode, False),
                                   atol=1e-5, rtol=1e-5)


def test_functional_output_size_int_and_defaults():
    x, rois = _data(2)
    out = mmops.roi_align(x, rois, 3)
    assert out.shape == (7, 3, 3, 3)
    torch.testing.assert_close(out, mmops.roi_align(x, rois, (3, 3)), rtol=0, atol=0)
    torch.testing.assert_close(out, op(x, rois, [3, 3], 1.0, 0, "avg", True), rtol=0, atol=0)
    kw = mmops.roi_align(x, rois, output_size=[2, 4], spatial_scale=0.25, sampling_ratio=3,
                         pool_mode="max", aligned=False)
    torch.testing.assert_close(kw, op(x, rois, [2, 4], 0.25, 3, "max", False), rtol=0, atol=0)


def test_functional_backward():
    x, _ = _data(3)
    x.requires_grad_(True)
    boxes = [torch.tensor([[1.0, 1.0, 6.0, 5.0]]), torch.tensor([[0.5, 2.0, 9.0, 7.5]])]
    out = mmops.roi_align(x, boxes, 2, 1.0, 2, "avg", True)
    go = torch.randn_like(out)
    out.backward(go)
    rois = torch.tensor([[0, 1.0, 1.0, 6.0, 5.0], [1, 0.5, 2.0, 9.0, 7.5]])
    exp = roi_align_ref_grad(x, rois, go, output_size=2, sampling_ratio=2)
    torch.testing.assert_close(x.grad.double(), exp, atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------- nn.Module

def test_module_matches_op_and_repr():
    x, rois = _data(4, scale=0.5)
    m = mmops.RoIAlign((2, 3), spatial_scale=0.5, sampling_ratio=2, pool_mode="max",
                       aligned=False)
    torch.testing.assert_close(m(x, rois), op(x, rois, [2, 3], 0.5, 2, "max", False),
                               rtol=0, atol=0)
    r = repr(m)
    assert r.startswith("RoIAlign(")
    for s in ("2", "3", "0.5", "max", "False"):
        assert s in r, (s, r)
    m_int = mmops.RoIAlign(4)
    out = m_int(x, rois)
    assert out.shape == (7, 3, 4, 4)
    torch.testing.assert_close(out, op(x, rois, [4, 4], 1.0, 0, "avg", True), rtol=0, atol=0)
    assert "avg" in repr(m_int) and "True" in repr(m_int)
    assert len(list(m.parameters())) == 0


def test_module_backward():
    x, rois = _data(5)
    x.requires_grad_(True)
    m = mmops.RoIAlign(3, 1.0, 0, "max", True)
    out = m(x, rois)
    go = torch.randn_like(out)
    out.backward(go)
    exp = roi_align_ref_grad(x, rois, go, output_size=3, pool_mode="max")
    torch.testing.assert_close(x.grad.double(), exp, atol=1e-5, rtol=1e-5)


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = mmops.RoIAlign((3, 2), 0.5, 2, "avg", True)

    def forward(self, x: torch.Tensor, rois: torch.Tensor) -> torch.Tensor:
        y = self.pool(x * 2.0, rois)
        z = torch.ops.mmops.roi_align(x, rois, [3, 2], 0.5, 0, "max", False)
        return y + z.relu()


def test_torchscript_module():
    x, rois = _data(6, scale=0.5)
    for mode in ("avg", "max"):
        m = mmops.RoIAlign((2, 3), 0.5, 2, mode, False)
        sm = torch.jit.script(m)
        torch.testing.assert_close(sm(x, rois), m(x, rois), rtol=0, atol=0)


def test_torchscript_save_load(tmp_path):
    x, rois = _data(7, scale=0.5)
    net = _Net()
    sm = torch.jit.script(net)
    path = str(tmp_path / "roi_net.pt")
    sm.save(path)
    loaded = torch.jit.load(path)
    exp = net(x, rois)
    torch.testing.assert_close(sm(x, rois), exp, rtol=0, atol=0)
    torch.testing.assert_close(loaded(x, rois), exp, rtol=0, atol=0)
    assert "mmops::roi_align" in loaded.code or "roi_align" in str(loaded.graph)
    # gradients flow through the loaded module
    xg = x.clone().requires_grad_(True)
    loaded(xg, rois).sum().backward()
    xe = x.clone().requires_grad_(True)
    net(xe, rois).sum().backward()
    torch.testing.assert_close(xg.grad, xe.grad, rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------- opcheck

OPCHECK_CASES = {
    "avg_aligned": dict(shape=(2, 3, 8, 9), K=5, out=[2, 3], scale=0.5, sr=2, mode="avg",
                        aligned=True, dtype=torch.float32),
    "max_unaligned_adaptive": dict(shape=(1, 2, 7, 7), K=4, out=[3, 3], scale=1.0, sr=0,
                                   mode="max", aligned=False, dtype=torch.float64),
    "max_aligned": dict(shape=(3, 4, 6, 11), K=6, out=[2, 2], scale=0.25, sr=1, mode="max",
                        aligned=True, dtype=torch.float32),
    "no_rois": dict(shape=(2, 3, 5, 5), K=0, out=[2, 2], scale=1.0, sr=2, mode="avg",
                    aligned=True, dtype=torch.float32),
}


def _opcheck_args(case, device, requires_grad):
    c = OPCHECK_CASES[case]
    torch.manual_seed(13)
    N, C, H, W = c["shape"]
    x = torch.randn(*c["shape"], dtype=c["dtype"], device=device, requires_grad=requires_grad)
    rois = random_rois(c["K"], N, H, W, dtype=c["dtype"], device=device,
                       spatial_scale=c["scale"]) if c["K"] else torch.zeros(
        0, 5, dtype=c["dtype"], device=device)
    return x, rois, c


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=requires_cuda)])
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("case", list(OPCHECK_CASES))
def test_opcheck_roi_align(case, requires_grad, device):
    x, rois, c = _opcheck_args(case, device, requires_grad)
    torch.library.opcheck(op.default, (x, rois, c["out"]),
                          dict(spatial_scale=c["scale"], sampling_ratio=c["sr"],
                               pool_mode=c["mode"], aligned=c["aligned"]))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=requires_cuda)])
@pytest.mark.parametrize("case", list(OPCHECK_CASES))
def test_opcheck_helper_ops(case, device):
    x, rois, c = _opcheck_args(case, device, False)
    args = (c["out"], c["scale"], c["sr"], c["mode"], c["aligned"])
    fwd = torch.ops.mmops._roi_align_forward
    bwd = torch.ops.mmops._roi_align_backward
    torch.library.opcheck(fwd.default, (x, rois, *args))
    out, argmax = fwd(x, rois, *args)
    go = torch.randn_like(out)
    bargs = (go, rois, argmax, list(x.shape), *args[1:])  # no output_size: from grad_output
    torch.library.opcheck(bwd.default, bargs)
    # the helper pair computes the same as the public op and its autograd
    xg = x.detach().requires_grad_(True)
    ref = op(xg, rois, *args)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    (g_ref,) = torch.autograd.grad(ref, xg, go)
    g = bwd(*bargs)
    assert g.shape == x.shape
    torch.testing.assert_close(g, g_ref, rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------- compile / export

def _fn(x, rois):
    y = torch.ops.mmops.roi_align(x * 1.5 - 0.25, rois, [3, 2], 0.5, 2, "max", False)
    z = torch.ops.mmops.roi_align(x, rois, [3, 2], 0.5, 0, "avg", True)
    return (y.sin() + 2 * z).sum(dim=1)


def _compile_and_compare(backend, device="cpu"):
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    cnt = CompileCounterWithBackend(backend)
    cfn = torch.compile(_fn, backend=cnt, fullgraph=True, dynamic=True)
    for seed, (N, C, H, W, K) in enumerate([(2, 3, 10, 12, 6), (3, 4, 14, 9, 9)]):
        x, rois = _data(20 + seed, N, C, H, W, K, device=device, scale=0.5)
        xe = x.clone().requires_grad_(True)
        xc = x.clone().requires_grad_(True)
        exp, out = _fn(xe, rois), cfn(xc, rois)
        assert out.shape == exp.shape == (K, 3, 2)
        torch.testing.assert_close(out, exp, rtol=1e-5, atol=1e-5)
        go = torch.randn_like(exp)
        exp.backward(go)
        out.backward(go)
        torch.testing.assert_close(xc.grad, xe.grad, rtol=1e-5, atol=1e-5)
    assert cnt.frame_count == 1, "dynamic=True should not recompile for a new size"


def test_compile_aot_eager():
    _compile_and_compare("aot_eager")


def test_compile_inductor():
    _compile_and_compare("inductor")


@requires_cuda
@pytest.mark.slow
def test_compile_inductor_cuda():
    _compile_and_compare("inductor", device="cuda")


class _ExportNet(torch.nn.Module):
    def forward(self, x, rois):
        y = torch.ops.mmops.roi_align(x, rois, [2, 2], 0.25, 0, "avg", False)
        return y * 2 + torch.ops.mmops.roi_align(x, rois, [2, 2], 0.25, 2, "max", True)


def test_export(tmp_path):
    x, rois = _data(30, scale=0.25)
    k = torch.export.Dim("k", min=2, max=64)
    ep = torch.export.export(_ExportNet(), (x, rois), dynamic_shapes=({}, {0: k}))
    targets = {n.target for n in ep.graph.nodes if n.op == "call_function"}
    assert any("mmops" in str(t) for t in targets), targets
    for x, rois in (_data(30, scale=0.25), _data(31, K=11, scale=0.25)):
        torch.testing.assert_close(ep.module()(x, rois), _ExportNet()(x, rois), rtol=0, atol=0)
    path = str(tmp_path / "roi_net.pt2")
    torch.export.save(ep, path)
    loaded = torch.export.load(path)
    x, rois = _data(32, K=5, scale=0.25)
    torch.testing.assert_close(loaded.module()(x, rois), _ExportNet()(x, rois), rtol=0, atol=0)
