"""A process that calls mmops ops on inputs it is sent (test_properties.py): a crash or a
hang in C++ ends or stalls this process only, and the test that sent the call reports it."""

import os
import resource
import sys


def serve(conn, memory_limit):
    # a call that asks for an absurd allocation fails instead of swapping the machine
    # (under AddressSanitizer, whose shadow memory a limit would exhaust, ASAN_OPTIONS bounds it)
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):
        resource.setrlimit(resource.RLIMIT_DATA, (memory_limit, memory_limit))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch

    import mmops  # noqa: F401

    torch.set_num_threads(1)
    conn.send("ready")
    while True:
        request = conn.recv()
        if request is None:
            return
        op_name, args = request
        op = getattr(torch.ops.mmops, op_name)
        try:
            out = op(*args)
            outs = out if isinstance(out, (tuple, list)) else [out]
            conn.send(("ok", [tuple(o.shape) for o in outs]))
        except Exception as error:  # the parent judges the type and the message
            conn.send(("error", type(error).__name__, str(error).split("\n")[0][:500]))
