"""The CuTe kernel on the GPU through poisoned buffers larger than its contract (properties/engine/buffers.py),
for the kernel's own tests, the smoke run and the mutants: the metadata vector is passed whole, slack
included, so ``Buffers.mismatches`` sees a write past metadata_size(tile_n). ``launch``, ``target`` and
``synchronize`` are the only places that touch the kernel or the device (a CPU test replaces them).
"""

import torch

from kernel import routing
from kernel.layout import EXPERTS
from properties.engine.buffers import make, report  # noqa: F401  (report: the kernel tests' failure text)


def target():
    """The device the harness routes on: the current CUDA device."""
    return torch.device("cuda", torch.cuda.current_device())


def synchronize():
    torch.cuda.synchronize()


def route_args(buffers):
    """``kernel.routing.route``'s positional arguments for the buffers (the metadata vector whole, slack
    included)."""
    case = buffers.case
    args = (buffers.logits, buffers.bias, buffers.ids, buffers.weights, float(case.scale), case.renormalize)
    if case.has_metadata:
        args += (buffers.metadata_all, case.local_expert_offset, case.num_local_experts, case.tile_n)
    return args


def launch(buffers):
    """Enqueue ``kernel.routing.route`` on the buffers."""
    routing.route(*route_args(buffers))


def buffers(case, device=None, row_stride=EXPERTS):
    """Poisoned buffers for ``case`` on ``device`` (default ``target()``), logits rows ``row_stride`` apart."""
    return make(case, target() if device is None else device, row_stride)


def route(case, device=None, row_stride=EXPERTS):
    """Route ``case`` once on fresh poisoned buffers; the buffers after the call."""
    made = buffers(case, device, row_stride)
    launch(made)
    synchronize()
    return made
