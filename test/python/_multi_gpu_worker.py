"""Processes of the multi-GPU tests (test_multi_gpu.py); lean imports: a spawned child imports this
module, not the test module.

  - the RoI-head model, its batch and one training step, shared by the DDP ranks and the
    single-process reference (ddp_rank: the body of one rank under torch.multiprocessing.spawn);
  - serve_spread: calls an op with its inputs spread over two devices in a process of its own, so
    that an op that launches on the wrong device and crashes ends this process only.
"""

import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import mmops  # noqa: E402  (registers torch.ops.mmops.*)

# --------------------------------------------------------------------------- the DDP model

IMAGES_PER_RANK = 2
ROIS_PER_IMAGE = 3
CLASSES = 4
SIZE = 16  # images SIZE x SIZE, features at stride 2
LR = 0.1


class RoIHead(nn.Module):
    """conv -> deform_conv2d (offsets from a conv) -> roi_align -> conv -> linear."""

    def __init__(self, channels: int = 6, pool: int = 3):
        super().__init__()
        self.pool = pool
        self.stem = nn.Conv2d(3, channels, 3, stride=2, padding=1)
        self.offset = nn.Conv2d(channels, 2 * 9, 3, padding=1)
        self.deform_weight = nn.Parameter(torch.randn(channels, channels, 3, 3) * 0.2)
        self.deform_bias = nn.Parameter(torch.randn(channels) * 0.1)
        self.head = nn.Conv2d(channels, channels, 3, padding=1)
        self.fc = nn.Linear(channels * pool * pool, CLASSES)
        with torch.no_grad():  # offsets of a pixel or so: sampling between pixels, every weight used
            self.offset.weight.mul_(3.0)

    def forward(self, images, rois):
        x = F.relu(self.stem(images))
        x = F.relu(mmops.deform_conv2d(x, self.offset(x), self.deform_weight, self.deform_bias, padding=1))
        r = mmops.roi_align(x, rois, self.pool, spatial_scale=0.5, sampling_ratio=2, aligned=True)
        return self.fc(F.relu(self.head(r)).flatten(1))


def make_model(dtype=torch.float64):
    torch.manual_seed(0)
    return RoIHead().to(dtype)


def make_batch(rank: int, dtype=torch.float64):
    """Rank `rank`'s images [IMAGES_PER_RANK, 3, SIZE, SIZE], rois [K, 5] (batch indices into its
    own images) and labels [K] in [0, CLASSES] (CLASSES: background); on the CPU."""
    g = torch.Generator().manual_seed(100 + rank)
    images = torch.randn(IMAGES_PER_RANK, 3, SIZE, SIZE, generator=g, dtype=dtype)
    k = IMAGES_PER_RANK * ROIS_PER_IMAGE
    xy = torch.rand(k, 2, generator=g, dtype=dtype) * (SIZE - 6)
    wh = 2.0 + torch.rand(k, 2, generator=g, dtype=dtype) * 6
    index = torch.arange(IMAGES_PER_RANK, dtype=dtype).repeat_interleave(ROIS_PER_IMAGE)[:, None]
    rois = torch.cat([index, xy, xy + wh], 1)
    labels = torch.randint(0, CLASSES + 1, (k,), generator=g)
    return images, rois, labels


def concatenated_batch(world: int, dtype=torch.float64):
    """Every rank's batch in one: the images one after the other, the rois' batch indices shifted."""
    batches = [make_batch(r, dtype) for r in range(world)]
    images = torch.cat([b[0] for b in batches])
    rois = torch.cat(
        [b[1] + torch.tensor([r * IMAGES_PER_RANK, 0, 0, 0, 0], dtype=dtype) for r, b in enumerate(batches)]
    )
    labels = torch.cat([b[2] for b in batches])
    return images, rois, labels


def loss_of(model, images, rois, labels):
    # "mean": sum / rows; every rank has as many rois, so the mean over the concatenated batch is
    # the mean of the ranks' means, which is what DDP's averaged gradients differentiate
    return mmops.sigmoid_focal_loss(model(images, rois), labels, 2.0, 0.25, None, "mean")


def train_step(model, optimizer, images, rois, labels):
    """One SGD step: returns the loss, the gradients {name: tensor} and the updated parameters,
    all on the CPU."""
    optimizer.zero_grad(set_to_none=True)
    loss = loss_of(model, images, rois, labels)
    loss.backward()
    grads = {n: p.grad.detach().cpu().clone() for n, p in model.named_parameters()}
    optimizer.step()
    params = {n: p.detach().cpu().clone() for n, p in model.named_parameters()}
    return loss.detach().cpu(), grads, params


def ddp_rank(rank: int, world: int, backend: str, devices: list, init_file: str, out_dir: str):
    """One DDP rank (torch.multiprocessing.spawn's target): one training step on its batch; saves
    {loss, grads, params} to out_dir/rank<rank>.pt. devices[rank]: its device ("cuda:1", "cpu")."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # no NVLink multicast
    device = torch.device(devices[rank])
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        model = make_model().to(device)
        ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=LR)
        images, rois, labels = (t.to(device) for t in make_batch(rank))
        loss, grads, params = train_step(ddp, optimizer, images, rois, labels)
        unwrap = lambda named: {n.removeprefix("module."): t for n, t in named.items()}  # noqa: E731
        torch.save(
            {"loss": loss, "grads": unwrap(grads), "params": unwrap(params)}, os.path.join(out_dir, f"rank{rank}.pt")
        )
        dist.barrier()
    finally:
        dist.destroy_process_group()


def reference_step(world: int, device):
    """The same step in one process on the concatenated batch of `world` ranks."""
    model = make_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    images, rois, labels = (t.to(device) for t in concatenated_batch(world))
    return train_step(model, optimizer, images, rois, labels)


# --------------------------------------------------------------------------- spread inputs


def tensor_slots(args):
    """(position, element or None, name suffix) of every tensor among args (lists: each element)."""
    slots = []
    for p, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            slots.append((p, None))
        elif isinstance(a, (list, tuple)) and a and all(isinstance(t, torch.Tensor) for t in a):
            slots += [(p, j) for j in range(len(a))]
    return slots


def moved(args, slot, device):
    """args with the tensor at `slot` (position, element) moved to `device`."""
    args = list(args)
    p, j = slot
    if j is None:
        args[p] = args[p].to(device)
    else:
        args[p] = [t.to(device) if k == j else t for k, t in enumerate(args[p])]
    return args


def spread_calls(case, home: str):
    """The calls of a conformance case to spread: (op, args on `home`) for the op itself and for
    each of its helper schemas (_<op>_forward / _backward, which take what autograd saved)."""
    from conformance import to_device

    sample = case.sample("cpu", case.dtype, 0)
    sample.args = to_device(sample.args, home)
    calls = [(case.op, tuple(sample.args))]
    if case.helpers:
        calls += [(op, tuple(args)) for op, args in case.helpers(sample)]
    return calls


def synchronize(*devices):
    for d in devices:
        if torch.device(d).type == "cuda":
            torch.cuda.synchronize(d)


def serve_spread(conn, home: str, away: str):
    """Answers (case name, call index, slot): the call of spread_calls(case, home) with the tensor
    at slot moved to `away`, then both devices synchronised. Replies ("raised", type, message),
    ("returned", [output devices]) or ("cuda_error", message) (the process is then unusable)."""
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    from conformance import all_cases

    cases = {c.name: c for c in all_cases()}
    conn.send("ready")
    while True:
        request = conn.recv()
        if request is None:
            return
        name, index, slot = request
        op, args = spread_calls(cases[name], home)[index]
        synchronize(home, away)
        args = moved(args, slot, away)
        try:
            out = op(*args)
        except Exception as error:  # the parent judges the type and the message
            reply = ("raised", type(error).__name__, str(error).split("\n")[0][:1000])
        else:
            outs = out if isinstance(out, (list, tuple)) else [out]
            reply = ("returned", [str(o.device) for o in outs if isinstance(o, torch.Tensor)])
        try:
            synchronize(home, away)
        except Exception as error:  # an illegal address and the like: sticky, the parent restarts us
            reply = ("cuda_error", str(error).split("\n")[0][:1000], reply)
        conn.send(reply)
