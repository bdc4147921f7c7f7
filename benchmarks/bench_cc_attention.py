"""Benchmark mmops's criss-cross attention (ca_weight, ca_map, CrissCrossAttention) against
plain-PyTorch einsum composites, in the same process.

Composites (in the benchmark's dtype; index tensors built once outside the timing):
  ca_weight: two einsums (row and column products), the column's H x H table gathered
             without the pixel itself, concatenated into mmops's [N, H + W - 1, H, W];
  ca_map:    the column weights scattered into an H x H table, two einsums, a sum;
  module:    mmcv 2.x's CrissCrossAttention forward (einsum energies with a -inf diagonal,
             one softmax over H + W, two einsums), on the same module weights.
The ops take CCNet's shapes: ca_weight on the query / key (C / 8 channels), ca_map on
softmax attention and the values (C channels), the module on x [N, C, H, W].

Cases: CUDA: CCNet's Cityscapes head (1 x 512 x 97 x 97, query / key 64 channels) and a
batch of smaller maps (8 x 256 x 48 x 64); CPU: 1 x 64 x 24 x 24. Two input distributions
through the two ops' inputs: Gaussian features (ca_weight) and softmax attention weights
(ca_map). Every row is first checked: mmops against the float64 reference of the tests
(relative to the largest value) and against the composite, forward and gradients; then
forward (no grad) and forward+backward (torch.autograd.grad w.r.t. both inputs, or x
and the parameters for the module, with a fixed output gradient) are timed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from bench_common import FwdBwdRow, ListOption, benchmark_main, rel_err  # test/python on the path

# isort: split
from cc_attention_reference import ca_map_ref, ca_weight_ref, column_index, criss_cross_attention_mmcv2

import mmops

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
OPS = ("ca_weight", "ca_map", "module")
# relative error allowed against the float64 reference (of the largest value)
TOL = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 5e-2}


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    channels: int  # the module's; query / key have channels // 8
    height: int
    width: int


CUDA_CASES = [Case("ccnet_97", 1, 512, 97, 97), Case("batch8_48x64", 8, 256, 48, 64)]
CPU_CASES = [Case("small_24", 1, 64, 24, 24), Case("batch2_16x20", 2, 32, 16, 20)]


def composite_ca_weight(t, f, index):
    row = torch.einsum("ncyx,ncys->nsyx", t, f)
    col = torch.einsum("ncyx,ncjx->njyx", t, f)
    return torch.cat([row, col.gather(1, index)], 1)


def composite_ca_map(weight, g, index):
    n, _, h, w = g.shape
    row = torch.einsum("nsyx,ncys->ncyx", weight[:, :w], g)
    table = weight.new_zeros(n, h, h, w).scatter(1, index, weight[:, w:])
    return row + torch.einsum("njyx,ncjx->ncyx", table, g)


def composite_module(module, x, mask):
    """mmcv 2.x's CrissCrossAttention.forward math, in x's dtype."""
    q, k, v = module.query_conv(x), module.key_conv(x), module.value_conv(x)
    h = x.shape[2]
    e_col = (torch.einsum("bchw,bciw->bwhi", q, k) + mask).transpose(1, 2)
    e_row = torch.einsum("bchw,bchj->bhwj", q, k)
    attn = torch.softmax(torch.cat([e_col, e_row], -1), -1)
    out = torch.einsum("bciw,bhwi->bchw", v, attn[..., :h])
    out = out + torch.einsum("bchj,bhwj->bchw", v, attn[..., h:])
    return (module.gamma(out) + x).contiguous()


def _check(name, pairs, tol, problems):
    """pairs: (what, value, reference); the check text, appending problems above tol."""
    errs = [rel_err(v.detach().double().cpu(), r.detach().double().cpu()) for _, v, r in pairs]
    text = "/".join(f"{e:.0e}" for e in errs)
    bad = [what for (what, _, _), e in zip(pairs, errs) if not e <= tol]
    if bad:
        problems.append(f"{name}: rel err {text} ({', '.join(bad)}) above {tol:g}")
        text += " !"
    return text


def _inputs(case, op, dtype, device):
    gen = torch.Generator().manual_seed(0)
    n, c, h, w = case.batch, case.channels, case.height, case.width
    if op == "ca_weight":
        shape = (n, c // 8, h, w)
        a, b = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
        out_shape = (n, h + w - 1, h, w)
    else:
        a = torch.randn(n, h + w - 1, h, w, generator=gen).mul(2).softmax(1)
        b = torch.randn(n, c, h, w, generator=gen)
        out_shape = (n, c, h, w)
    go = torch.randn(out_shape, generator=gen)
    return [t.to(device=device, dtype=dtype) for t in (a, b, go)]


def bench_cc(case, dtype_name, op, run, timer, problems):
    device, dtype = run.device, DTYPES[dtype_name]
    n, c, h, w = case.batch, case.channels, case.height, case.width
    shape = f"{n}x{c}x{h}x{w}" + ("" if op != "ca_weight" else f" (qk {c // 8})")
    row = FwdBwdRow((op, shape, dtype_name))
    name = f"cc_attention/{case.name}/{op}/{dtype_name}"
    index = column_index(n, h, w, device)
    # the checks in full float32 (no TF32 convolutions: the reference convolves one image, the
    # op the batch, and cuDNN may pick other algorithms for each); timed below with the defaults
    with torch.backends.cudnn.flags(enabled=torch.backends.cudnn.enabled, allow_tf32=False):
        try:
            if op == "module":
                torch.manual_seed(0)
                module = mmops.CrissCrossAttention(c)
                with torch.no_grad():
                    module.gamma.scale.fill_(0.5)
                module = module.to(device=device, dtype=dtype)
                x = torch.randn(n, c, h, w, generator=torch.Generator().manual_seed(1)).to(device=device, dtype=dtype)
                go = torch.randn(n, c, h, w, generator=torch.Generator().manual_seed(2)).to(device=device, dtype=dtype)
                mask = torch.diag(torch.full((h,), float("-inf"), device=device, dtype=dtype))
                leaves = [x.requires_grad_(True), *module.parameters()]

                def mm():
                    return module(x)

                def base():
                    return composite_module(module, x, mask)

                with torch.no_grad():
                    ref = criss_cross_attention_mmcv2(x.detach()[:1], module.state_dict())
            else:
                a, b, go = _inputs(case, op, dtype, device)
                leaves = [a.requires_grad_(True), b.requires_grad_(True)]
                op_fn = torch.ops.mmops.ca_weight if op == "ca_weight" else torch.ops.mmops.ca_map
                comp = composite_ca_weight if op == "ca_weight" else composite_ca_map

                def mm():
                    return op_fn(a, b)

                def base():
                    return comp(a, b, index)

                with torch.no_grad():
                    ref_fn = ca_weight_ref if op == "ca_weight" else ca_map_ref
                    ref = ref_fn(a.detach()[:1], b.detach()[:1])
            out = mm()
            grads = torch.autograd.grad(out, leaves, go)
        except Exception as exc:
            row.check = "ERROR"
            problems.append(f"{name}: mmops raised {type(exc).__name__}: {exc}")
            return row
        base_out = base()
        base_grads = torch.autograd.grad(base_out, leaves, go)
        pairs = [("reference", out[:1], ref), ("composite", out, base_out)]
        # The key bias adds a per-pixel constant to the energies, which the softmax cancels: its
        # gradient is zero up to rounding on both sides, so a relative error of it means nothing.
        checked = [i for i, leaf in enumerate(leaves) if op != "module" or leaf is not module.key_conv.bias]
        pairs += [(f"grad {i}", grads[i], base_grads[i]) for i in checked]
        row.check = _check(name, pairs, TOL[dtype], problems)
        del out, grads, base_out, base_grads, ref
    with torch.no_grad():
        row.mm_fwd = timer(mm)
        row.base_fwd = timer(base)
    row.mm_fb = timer(lambda: torch.autograd.grad(mm(), leaves, go))
    row.base_fb = timer(lambda: torch.autograd.grad(base(), leaves, go))
    return row


def main() -> int:
    return benchmark_main(
        __doc__,
        "cc_attention benchmark",
        iters=(50, 5),
        warmup=(5, 1),
        cases=(CUDA_CASES, CPU_CASES),
        options=[
            ListOption("dtypes", DTYPES, list(DTYPES), ["fp32"]),
            ListOption("ops", OPS, OPS, OPS),
        ],
        bench=bench_cc,
        labels=("op", "shape", "dtype"),
        baseline="einsum composite",
        check="rel err ref/composite/grads",
        loop=["ops", "dtypes"],
        with_torchvision=False,
    )


if __name__ == "__main__":
    sys.exit(main())
