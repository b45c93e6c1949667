"""The floor under an eager launch issued from Python on this host: an empty kernel (PTX ``ret;``) launched through
ctypes straight into the driver (libcuda), with ``cuLaunchKernel`` and with ``cuLaunchKernelEx`` carrying the
programmatic-stream-serialization (PDL) attribute every route launch carries. No launch path written in Python
can be cheaper per call; route's eager figures are read against it (results["launch_floor"])."""

import ctypes

import torch

from properties.bench.host_clock import means_us, median

EMPTY_KERNEL = b""".version 8.0
.target sm_90
.address_size 64
.visible .entry empty() { ret; }
"""
PROGRAMMATIC_STREAM_SERIALIZATION = 6  # cuda.h: CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION


class LaunchAttribute(ctypes.Structure):
    """cuda.h's CUlaunchAttribute: the id, padding to 8 bytes, a 64-byte value union."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_int), ("value", ctypes.c_ubyte * 64)]


class LaunchConfig(ctypes.Structure):
    """cuda.h's CUlaunchConfig."""
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared_bytes", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attributes", ctypes.POINTER(LaunchAttribute)),
                ("attribute_count", ctypes.c_uint)]


def _checked(what, status):
    if status != 0:
        raise RuntimeError(f"launch floor: {what} returned CUresult {status}")


def launch_floor(calls):
    """{"cuLaunchKernel_us", "cuLaunchKernelEx_pdl_us", "calls"}: host time per launch of the empty kernel on the
    current device's current stream, each the median of REPEATS means of ``calls`` launches."""
    torch.cuda.init()  # the primary context current on this thread, as route's launches have it
    driver = ctypes.CDLL("libcuda.so.1")
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    _checked("cuModuleLoadData", driver.cuModuleLoadData(ctypes.byref(module), EMPTY_KERNEL))
    try:
        _checked("cuModuleGetFunction", driver.cuModuleGetFunction(ctypes.byref(function), module, b"empty"))
        stream = torch.cuda.current_stream()
        handle = ctypes.c_void_p(stream.cuda_stream)
        attribute = LaunchAttribute(id=PROGRAMMATIC_STREAM_SERIALIZATION)
        attribute.value[0] = 1
        config = LaunchConfig((1, 1, 1), (32, 1, 1), 0, handle, ctypes.pointer(attribute), 1)
        plain = lambda: driver.cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, handle, None, None)  # noqa: E731
        with_pdl = lambda: driver.cuLaunchKernelEx(ctypes.byref(config), function, None, None)  # noqa: E731
        _checked("cuLaunchKernel", plain())
        _checked("cuLaunchKernelEx", with_pdl())
        stream.synchronize()
        return {"cuLaunchKernel_us": median(means_us(plain, calls, stream.synchronize)),
                "cuLaunchKernelEx_pdl_us": median(means_us(with_pdl, calls, stream.synchronize)), "calls": calls}
    finally:
        driver.cuModuleUnload(module)
