"""Spread the gate's pytest-xdist workers over the host's GPUs: one group of workers per GPU, sized from the
host's cores.

The gate starts ``workers(gpus, cpus)`` workers and tells them the GPU count through ``GATE_GPUS``; each
worker, before anything touches CUDA, sees only its group's GPU (``CUDA_VISIBLE_DEVICES``): worker ``gwN``
gets GPU ``N mod gpus``, so every GPU gets the same number of workers whatever that number is. Standard
library only: it runs first thing in the root conftest.
"""

MAX_WORKERS_PER_GPU = 16  # past this many processes, one GPU's queue, not the cores, sets the pace
RESERVED_CPUS = 2  # for the pytest controller and the GPU's driver threads
GPUS_ENV = "GATE_GPUS"
WORKER_ENV = "PYTEST_XDIST_WORKER"  # "gw0", "gw1", ... set by pytest-xdist in each worker
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"


def workers_per_gpu(gpus, cpus):
    """Workers per GPU on a host of ``gpus`` GPUs and ``cpus`` cores: the cores left after RESERVED_CPUS,
    shared out, at most MAX_WORKERS_PER_GPU, at least 1."""
    if gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")
    return max(1, min(MAX_WORKERS_PER_GPU, (cpus - RESERVED_CPUS) // gpus))


def workers(gpus, cpus, per_gpu=None):
    """How many workers the gate starts: ``per_gpu`` (default: workers_per_gpu) for each of ``gpus`` GPUs."""
    return (per_gpu or workers_per_gpu(gpus, cpus)) * gpus


def device_of(worker, gpus, visible=None):
    """The device (as CUDA_VISIBLE_DEVICES names it) of worker ``gwN``: GPU N mod ``gpus``; ``visible``, the
    parent's CUDA_VISIBLE_DEVICES, names the GPUs to spread over."""
    if not worker.startswith("gw") or not worker[2:].isdigit():
        raise ValueError(f"{WORKER_ENV} must look like gw0, got {worker!r}")
    devices = [d.strip() for d in visible.split(",")] if visible else [str(i) for i in range(gpus)]
    if len(devices) < gpus:
        raise ValueError(f"{GPUS_ENV}={gpus} but {VISIBLE_ENV}={visible!r} names {len(devices)} devices")
    return devices[int(worker[2:]) % gpus]


def pin_worker(environ):
    """In a gate worker on a host of several GPUs, restrict ``environ`` to the worker's GPU; else no change."""
    gpus, worker = environ.get(GPUS_ENV), environ.get(WORKER_ENV)
    if not gpus or not worker or int(gpus) < 2:
        return
    environ[VISIBLE_ENV] = device_of(worker, int(gpus), environ.get(VISIBLE_ENV))
