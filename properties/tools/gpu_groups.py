"""Spread the gate's pytest-xdist workers over the host's GPUs: one group of workers per GPU.

The gate starts ``workers(gpus)`` workers and tells them the GPU count through ``GATE_GPUS``; each worker,
before anything touches CUDA, sees only its group's GPU (``CUDA_VISIBLE_DEVICES``). Standard library only:
it runs first thing in the root conftest.
"""

WORKERS_PER_GPU = 4
GPUS_ENV = "GATE_GPUS"
WORKER_ENV = "PYTEST_XDIST_WORKER"  # "gw0", "gw1", ... set by pytest-xdist in each worker
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"


def workers(gpus):
    """How many workers the gate starts on a host with ``gpus`` GPUs."""
    return WORKERS_PER_GPU * gpus


def device_of(worker, gpus, visible=None):
    """The device (as CUDA_VISIBLE_DEVICES names it) of worker ``gwN``: workers 0..3 the first GPU, 4..7 the
    second, ...; ``visible``, the parent's CUDA_VISIBLE_DEVICES, names the GPUs to spread over."""
    if not worker.startswith("gw") or not worker[2:].isdigit():
        raise ValueError(f"{WORKER_ENV} must look like gw0, got {worker!r}")
    devices = [d.strip() for d in visible.split(",")] if visible else [str(i) for i in range(gpus)]
    if len(devices) < gpus:
        raise ValueError(f"{GPUS_ENV}={gpus} but {VISIBLE_ENV}={visible!r} names {len(devices)} devices")
    return devices[(int(worker[2:]) // WORKERS_PER_GPU) % gpus]


def pin_worker(environ):
    """In a gate worker on a host of several GPUs, restrict ``environ`` to the worker's GPU; else no change."""
    gpus, worker = environ.get(GPUS_ENV), environ.get(WORKER_ENV)
    if not gpus or not worker or int(gpus) < 2:
        return
    environ[VISIBLE_ENV] = device_of(worker, int(gpus), environ.get(VISIBLE_ENV))
