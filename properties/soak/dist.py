"""Scale-out through torch.distributed: one process per GPU started by torchrun (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE), NCCL where each rank has a GPU of its own, gloo on CPUs or where ranks share
a GPU (NCCL refuses two ranks on one device). A single process needs no process group."""

import os
from dataclasses import dataclass

import torch
import torch.distributed as td

# NVLink SHARP multicast stays off everywhere (KINDS.md of the lending machines).
WORKER_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
BACKENDS = ("auto", "nccl", "gloo")


def worker_env(base=None):
    """``base`` (default os.environ) with WORKER_ENV set, for processes this code starts."""
    return {**(os.environ if base is None else base), **WORKER_ENV}


@dataclass(frozen=True)
class Context:
    rank: int
    world: int
    device: torch.device
    backend: str | None  # None: a single process, no process group

    @property
    def leader(self):
        return self.rank == 0


def _choose_device(request, local_rank):
    if request == "cpu" or (request == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError(f"--device {request}: no CUDA device is usable here")
    if request.startswith("cuda:"):
        index, visible = int(request.split(":")[1]), torch.cuda.device_count()
        if index >= visible:
            raise ValueError(f"--device {request}: this machine shows {visible} CUDA device(s), cuda:0 to "
                             f"cuda:{visible - 1}")
        return torch.device(request)
    return torch.device("cuda", local_rank % torch.cuda.device_count())


def setup(device="auto", backend="auto"):
    """The Context of this process: its device (cuda:LOCAL_RANK mod the GPU count, or the CPU) and, under
    torchrun with WORLD_SIZE > 1, an initialised process group."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    os.environ.update(WORKER_ENV)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local_rank, local_world = int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    chosen = _choose_device(device, local_rank)
    if chosen.type == "cuda":
        torch.cuda.set_device(chosen)
    if world == 1:
        return Context(0, 1, chosen, None)
    if backend == "auto":
        own_gpu = chosen.type == "cuda" and local_world <= torch.cuda.device_count()
        backend = "nccl" if own_gpu else "gloo"
    td.init_process_group(backend, device_id=chosen if backend == "nccl" else None)
    return Context(rank, world, chosen, backend)


def all_sum(ctx, values):
    """Element-wise sum of the int list ``values`` over every rank (itself alone without a group)."""
    if ctx.backend is None:
        return list(values)
    t = torch.tensor(values, dtype=torch.int64, device=ctx.device if ctx.backend == "nccl" else "cpu")
    td.all_reduce(t)
    return t.tolist()


def gather(ctx, obj):
    """Every rank's ``obj``, in rank order, on every rank."""
    if ctx.backend is None:
        return [obj]
    out = [None] * ctx.world
    td.all_gather_object(out, obj)
    return out


def teardown(ctx):
    if ctx.backend is not None:
        td.destroy_process_group()
